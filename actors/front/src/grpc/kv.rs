use std::pin::Pin;
use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::kv_server::Kv;
use actcd_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, RangeStreamResponse, TxnRequest, TxnResponse,
};
use actcd_types::EtcdError;
use actcd_types::msg::ApplyResponse;
use std::task::{Context, Poll};

use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::pipeline::{Pipeline, is_txn_read_only};

/// The chunks of one RangeStream answer.
type RangeChunks = Pin<Box<dyn Stream<Item = Result<RangeStreamResponse, Status>> + Send>>;

/// A RangeStream's chunks as its producer sends them, never ending cleanly before the last
/// chunk (the one with the header) or an error: a producer gone without either (ended at
/// shutdown before it could send why, or failed) leaves the client
/// [`crate::pipeline::shutdown_status`], not a clean end it would take for the whole answer.
struct Chunks {
    rx: ReceiverStream<Result<RangeStreamResponse, Status>>,
    ended: bool,
}

impl Stream for Chunks {
    type Item = Result<RangeStreamResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let item = match Pin::new(&mut self.rx).poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        self.ended = match &item {
            Some(Ok(chunk)) => chunk
                .range_response
                .as_ref()
                .is_some_and(|r| r.header.is_some()),
            Some(Err(_)) | None => true,
        };
        Poll::Ready(Some(
            item.unwrap_or_else(|| Err(crate::pipeline::shutdown_status())),
        ))
    }
}

pub struct KvService {
    pub pipeline: Arc<Pipeline>,
}

/// The applier answered with a response of another kind: a bug, reported rather than panicked.
fn mismatch(what: &str) -> Status {
    EtcdError::Internal(format!("actcd: unexpected apply result for {what}")).to_status()
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        // A learner serves serializable reads only (the gate let the method through).
        if !req.get_ref().serializable && *self.pipeline.routes.learner.borrow() {
            return Err(EtcdError::NotSupportedForLearner.into());
        }
        let who = self.pipeline.who(&req).await?;
        Ok(Response::new(
            self.pipeline.range(req.into_inner(), who).await?,
        ))
    }

    type RangeStreamStream = RangeChunks;

    /// etcd 3.7's RangeStream ([`Pipeline::range_stream`]). A learner's tower layer has
    /// refused it already.
    async fn range_stream(
        &self,
        req: Request<RangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        let who = self.pipeline.who(&req).await?;
        let rx = Arc::clone(&self.pipeline)
            .range_stream(req.into_inner(), who)
            .await?;
        Ok(Response::new(Box::pin(Chunks {
            rx: ReceiverStream::new(rx),
            ended: false,
        })))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let r = InternalRaftRequest {
            put: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Put(p) => Ok(Response::new(p)),
            _ => Err(mismatch("put")),
        }
    }

    async fn delete_range(
        &self,
        req: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let r = InternalRaftRequest {
            delete_range: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::DeleteRange(d) => Ok(Response::new(d)),
            _ => Err(mismatch("delete")),
        }
    }

    /// A txn that writes nothing is served like a read; any other goes through the log.
    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        let txn = req.into_inner();
        if is_txn_read_only(&txn) {
            return Ok(Response::new(self.pipeline.read_only_txn(txn, who).await?));
        }
        let r = InternalRaftRequest {
            txn: Some(txn),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Txn(t) => Ok(Response::new(t)),
            _ => Err(mismatch("txn")),
        }
    }

    async fn compact(
        &self,
        req: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let who = self.pipeline.who(&req).await?;
        // Root only with auth on (etcd 3.5.28+, GHSA-q8m4-xhhv-38mg; 3.5.1 let anyone compact).
        self.pipeline.check_admin(who.clone()).await?;
        let r = InternalRaftRequest {
            compaction: Some(req.into_inner()),
            ..Default::default()
        };
        match self.pipeline.write(r, who).await? {
            ApplyResponse::Compaction(c) => Ok(Response::new(c)),
            _ => Err(mismatch("compact")),
        }
    }
}
