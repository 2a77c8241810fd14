//! [`MvccReader`]: reads of the key space served from the store's published [`ReadView`]s, in a
//! mailbox of their own, so that no read waits in the writer's mailbox behind applies. In the
//! server it answers the watch hub's History and the front's HashKV; the front reads Range and
//! read-only txns from the views itself (`actcd_types::msg::KeyReads`), with no mailbox at all.
//! `Range` and `ReadTxn` stay here for callers that hold no views (benches, tests). Which
//! thread it runs on is the daemon's choice (beside the front on small machines, else its own).
//!
//! It owns nothing but the receiving end of the views ([`ReadViews`]); what it answers is what
//! the store had applied when it published the newest view. A caller that must see a write
//! (read-your-writes after an acknowledged put, a linearizable read once the read index is
//! applied) gets it: the store publishes a batch's view before it answers the batch's waiters
//! and before it tells the applier, hence raft, that the batch is applied.

use actcd_types::EtcdError;
use actcd_types::msg::{HashKv, HashKvResult, History, HistoryChunk, Range, ReadTxn};
use actix::{
    Actor, ActorFutureExt, Addr, Arbiter, Context, Handler, ResponseActFuture, WrapFuture,
};

use crate::view::ReadViews;

pub struct MvccReader {
    views: ReadViews,
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    /// HashKV durations (etcd's `etcd_mvcc_hash_rev_duration_seconds`).
    hash_rev: actcd_types::meter::Histogram,
}

impl MvccReader {
    pub fn new(views: ReadViews) -> Self {
        Self {
            views,
            meter: actcd_types::meter::Meter::new(),
            hash_rev: actcd_types::meter::Histogram::new(&crate::actor::HASH_BUCKETS),
        }
    }

    /// Starts the reader on a new `Arbiter` thread. Must be called inside a running System.
    pub fn start_on_own_thread(views: ReadViews) -> Addr<Self> {
        let arbiter = Arbiter::new();
        Self::start_in_arbiter(&arbiter.handle(), move |_| Self::new(views))
    }
}

impl Actor for MvccReader {
    type Context = Context<Self>;

    /// Every read of the server comes through here (see [`crate::MvccActor`]'s).
    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(65536);
    }
}

impl Handler<Range> for MvccReader {
    type Result = Result<actcd_proto::etcdserverpb::RangeResponse, EtcdError>;

    fn handle(&mut self, msg: Range, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("Range");
        self.views.range(&msg.request)
    }
}

impl Handler<ReadTxn> for MvccReader {
    type Result = Result<actcd_proto::etcdserverpb::TxnResponse, EtcdError>;

    fn handle(&mut self, msg: ReadTxn, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ReadTxn");
        self.views.read_txn(&msg.request)
    }
}

/// Hashes on a blocking thread: the scan reads the whole key table (seconds on a large
/// store), and this reader may share its thread with the write path.
impl Handler<HashKv> for MvccReader {
    type Result = ResponseActFuture<Self, Result<HashKvResult, EtcdError>>;

    fn handle(&mut self, msg: HashKv, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("HashKv");
        let started = std::time::Instant::now();
        let views = self.views.clone();
        let hashed = tokio::task::spawn_blocking(move || views.hash_kv(msg.revision));
        Box::pin(hashed.into_actor(self).map(move |answer, act, _| {
            act.hash_rev.observe(started.elapsed().as_secs_f64());
            answer.map_err(|e| EtcdError::internal(format!("mvcc: hash: {e}")))?
        }))
    }
}

impl Handler<History> for MvccReader {
    type Result = Result<HistoryChunk, EtcdError>;

    fn handle(&mut self, msg: History, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("History");
        self.views.history(msg.from, msg.to, msg.max_events)
    }
}

impl MvccReader {
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        vec![actcd_types::meter::Sample::histogram(
            "etcd_mvcc_hash_rev_duration_seconds",
            &self.hash_rev,
        )]
    }
}

actcd_types::impl_mailbox_probe!(MvccReader, meter, samples);
