//! The watch hub as an actor: thin glue between messages and [`WatchHub`].

use actcd_types::EtcdError;
use std::collections::VecDeque;

use actcd_types::msg::{History, Notify, WatchInterest};
use actcd_types::watch::{
    CloseStream, OpenStream, OpenedStream, RejectWatch, ResponseSender, StreamResponse,
    WatchRequestMsg, response_queue,
};
use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, MessageResult, Recipient,
    WrapFuture,
};

use crate::hub::{HubConfig, HubStats, SendError, StreamSink, WatchHub};

// ---------------------------------------------------------------- messages

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

/// A stream's queue is bounded by responses and by bytes ([`response_queue`]); `try_send`
/// never waits.
impl StreamSink for ResponseSender {
    fn try_send(&mut self, response: StreamResponse) -> Result<(), SendError> {
        ResponseSender::try_send(self, response)
    }

    fn room(&self) -> usize {
        ResponseSender::room(self)
    }

    fn capacity(&self) -> usize {
        ResponseSender::capacity(self)
    }
}

pub struct WatchHubActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    hub: WatchHub<ResponseSender>,
    history: Recipient<History>,
    retry_scheduled: bool,
    /// Where to say whether notifications are wanted; `None` keeps them always on.
    interest: Option<Recipient<WatchInterest>>,
    listening: Listening,
    /// Requests that arrived while the hub was not listening, answered once it is again.
    held: VecDeque<Held>,
    /// etcd 3.7's `etcd_debugging_server_watch_send_loop_progress_duration_seconds`.
    progress_durations: actcd_types::meter::Histogram,
}

/// The watch send loop histograms' buckets (etcd's `ExponentialBuckets(0.001, 2, 14)`): 1 ms
/// doubling up to 8.192 s.
const SEND_LOOP_BUCKETS: [f64; 14] = actcd_types::meter::exponential_buckets(0.001, 2.0);

/// Whether the store notifies this hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listening {
    Yes,
    /// No watchers: the store was told to stop notifying.
    No,
    /// Asked to start again; the reply (the store's revision) is on its way.
    Waking,
}

/// A stream request whose answer needs the hub's clock, held while it catches up.
enum Held {
    Request(WatchRequestMsg),
    Reject(RejectWatch),
}

impl WatchHubActor {
    /// `history` is the MVCC store; `current_revision` its revision when the hub starts (the
    /// first `Notify` carries the events after it).
    pub fn new(config: HubConfig, history: Recipient<History>, current_revision: i64) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            hub: WatchHub::new(config, current_revision),
            history,
            retry_scheduled: false,
            interest: None,
            listening: Listening::Yes,
            held: VecDeque::new(),
            progress_durations: actcd_types::meter::Histogram::new(&SEND_LOOP_BUCKETS),
        }
    }

    /// A progress pass over every stream, timed. etcd's send loop of each stream times its
    /// own pass on every tick of its progress ticker; the hub passes over all streams at once,
    /// so each stream is observed with its share of the pass: the count is etcd's (streams ×
    /// ticks), each value the pass's time per stream.
    fn progress_tick(&mut self) {
        let started = std::time::Instant::now();
        self.hub.progress_tick();
        let streams = self.hub.stats().streams;
        if let Ok(n) = u32::try_from(streams)
            && n > 0
        {
            let share = (started.elapsed() / n).as_secs_f64();
            for _ in 0..n {
                self.progress_durations.observe(share);
            }
        }
    }

    /// Lets the hub stop the store's notifications while it has no watchers: with none, each
    /// write would still cost the store a wake-up of this thread (measured on 2 cores: single-
    /// client put p50 0.23–0.25 → 0.22 ms). The first request after that asks the store to
    /// notify again and learns its revision before it is answered; the store handles its
    /// mailbox in order, so every write a client saw acknowledged before sending the request is
    /// at or below that revision, and every later one is notified.
    pub fn with_interest(mut self, interest: Recipient<WatchInterest>) -> Self {
        self.interest = Some(interest);
        self
    }

    /// No watcher left: tell the store to stop notifying.
    fn maybe_stop_listening(&mut self) {
        if self.listening == Listening::Yes
            && self.hub.watcher_count() == 0
            && let Some(interest) = &self.interest
        {
            interest.do_send(WatchInterest { on: false });
            self.listening = Listening::No;
        }
    }

    /// Holds `held` until the hub listens again, asking the store if nobody has yet. Returns
    /// it back when the hub is listening already.
    fn hold_unless_listening(&mut self, held: Held, ctx: &mut Context<Self>) -> Option<Held> {
        match self.listening {
            Listening::Yes => return Some(held),
            Listening::Waking => {}
            Listening::No => {
                let Some(interest) = self.interest.clone() else {
                    self.listening = Listening::Yes;
                    return Some(held);
                };
                self.listening = Listening::Waking;
                let ask = async move { interest.send(WatchInterest { on: true }).await };
                ctx.spawn(ask.into_actor(self).map(|res, act, ctx| match res {
                    Ok(revision) => {
                        act.hub.advance_revision(revision);
                        act.listening = Listening::Yes;
                        while let Some(h) = act.held.pop_front() {
                            act.answer(h);
                        }
                        act.pump(ctx);
                    }
                    // The store is gone: the server is stopping.
                    Err(_) => act.held.clear(),
                }));
            }
        }
        self.held.push_back(held);
        None
    }

    fn answer(&mut self, held: Held) {
        match held {
            Held::Request(m) => self.hub.handle_request(m.stream, m.request),
            Held::Reject(m) => self.hub.reject_create(m.stream, m.watch_id, m.reason),
        }
    }

    /// After every message: start the history read the hub wants (at most one in flight, awaited
    /// beside other messages so notifications keep flowing), and schedule a retry if anything
    /// is left waiting.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        self.maybe_stop_listening();
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
        self.maybe_stop_listening();
        let every = self.hub.config().progress_interval;
        if !every.is_zero() {
            ctx.run_interval(every, |act, ctx| {
                act.progress_tick();
                act.pump(ctx);
            });
        }
    }
}

impl Handler<Notify> for WatchHubActor {
    type Result = ();

    /// The store applied a batch: feed synced watchers.
    fn handle(&mut self, msg: Notify, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("Notify");
        if msg.restored {
            self.hub.restore(msg.revision);
        } else {
            self.hub.notify(msg.revision, msg.events);
        }
        self.pump(ctx);
    }
}

impl Handler<OpenStream> for WatchHubActor {
    type Result = MessageResult<OpenStream>;

    fn handle(&mut self, msg: OpenStream, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("OpenStream");
        let (tx, rx) = response_queue(msg.capacity, msg.max_bytes);
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
        let _timer = self.meter.start("WatchRequestMsg");
        if let Some(h) = self.hold_unless_listening(Held::Request(msg), ctx) {
            self.answer(h);
            self.pump(ctx);
        }
    }
}

impl Handler<RejectWatch> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, msg: RejectWatch, ctx: &mut Context<Self>) {
        if let Some(h) = self.hold_unless_listening(Held::Reject(msg), ctx) {
            self.answer(h);
            self.pump(ctx);
        }
    }
}

impl Handler<CloseStream> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, msg: CloseStream, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("CloseStream");
        self.hub.close_stream(msg.stream);
        self.pump(ctx);
    }
}

impl Handler<ProgressTick> for WatchHubActor {
    type Result = ();

    fn handle(&mut self, _: ProgressTick, ctx: &mut Context<Self>) {
        let _timer = self.meter.start("ProgressTick");
        self.progress_tick();
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

impl WatchHubActor {
    /// etcd's watch metrics: streams, watchers, slow (unsynced or victim) watchers, events
    /// sent, responses held back, the progress passes' times.
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        use actcd_types::meter::Sample;
        let s = self.hub.stats();
        vec![
            Sample::value("etcd_debugging_mvcc_watch_stream_total", s.streams as f64),
            Sample::value("etcd_debugging_mvcc_watcher_total", s.watchers as f64),
            Sample::value(
                "etcd_debugging_mvcc_slow_watcher_total",
                (s.unsynced + s.victims) as f64,
            ),
            Sample::value("etcd_debugging_mvcc_events_total", s.events_sent as f64),
            Sample::value("etcd_debugging_mvcc_pending_events_total", s.backlog as f64),
            Sample::histogram(
                "etcd_debugging_server_watch_send_loop_progress_duration_seconds",
                &self.progress_durations,
            ),
        ]
    }
}

actcd_types::impl_mailbox_probe!(WatchHubActor, meter, samples);
