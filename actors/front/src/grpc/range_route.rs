//! `/etcdserverpb.KV/Range` served in front of the generated KV service, with a codec that
//! writes an answer the store encoded (`actcd_types::msg::RangeAnswer::Encoded`) straight into
//! tonic's response buffer.
//!
//! **Why a route of our own.** tonic's prost codec encodes a `RangeResponse` message: the
//! store would decode every record into a `KeyValue` for it to encode again, and the buffer it
//! encodes into grows by doubling, so a large Range held its answer two to three times over.
//! The store's encoded answer is written once, into a buffer reserved at its exact length
//! (see `actcd-mvcc`'s `encode.rs`). Only this one method needs that codec: the other KV
//! methods, and `RangeResponse` everywhere else (txns, the JSON gateway, clients), keep the
//! generated code and its types. The route answers exactly as the generated method did: the
//! same learner rule, request decoding, size limits and errors; an answer that is not encoded
//! (sorted or filtered) is written by prost as before.

use std::convert::Infallible;
use std::sync::Arc;

use actcd_proto::etcdserverpb::RangeRequest;
use actcd_proto::etcdserverpb::kv_server::KvServer;
use actcd_types::EtcdError;
use actcd_types::msg::RangeAnswer;
use prost::Message;
use tonic::body::Body;
use tonic::codec::{EncodeBuf, Encoder};
use tonic::codegen::BoxFuture;
use tonic::server::UnaryService;
use tonic::{Request, Response, Status};

use crate::grpc::kv::KvService;
use crate::grpc::own_method::{OwnCodec, OwnMethod, WithOwnMethod};
use crate::pipeline::Pipeline;

/// The KV service: Range here, every other method by the generated server.
pub(crate) type KvRoutes = WithOwnMethod<KvServer<KvService>, RangeMethod>;

pub(crate) fn kv_routes(
    kv: KvServer<KvService>,
    pipeline: Arc<Pipeline>,
    max_decoding: usize,
) -> KvRoutes {
    WithOwnMethod::new(kv, RangeMethod { pipeline }, max_decoding)
}

impl OwnMethod for RangeMethod {
    const PATH: &'static str = "/etcdserverpb.KV/Range";

    fn serve(
        &self,
        req: http::Request<Body>,
        max_decoding: usize,
    ) -> BoxFuture<http::Response<Body>, Infallible> {
        let method = self.clone();
        Box::pin(async move {
            let mut grpc = OwnCodec::<RangeEncoder, RangeRequest>::grpc(max_decoding);
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// The Range method itself, as `KvService::range` was.
#[derive(Clone)]
pub(crate) struct RangeMethod {
    pipeline: Arc<Pipeline>,
}

impl UnaryService<RangeRequest> for RangeMethod {
    type Response = RangeAnswer;
    type Future = BoxFuture<Response<RangeAnswer>, Status>;

    fn call(&mut self, req: Request<RangeRequest>) -> Self::Future {
        let pipeline = self.pipeline.clone();
        Box::pin(async move {
            // A learner serves serializable reads only (the gate let the method through).
            if !req.get_ref().serializable && *pipeline.routes.learner.borrow() {
                return Err(EtcdError::NotSupportedForLearner.into());
            }
            let who = pipeline.who(&req).await?;
            Ok(Response::new(
                pipeline.range_answer(req.into_inner(), who).await?,
            ))
        })
    }
}

/// Writes an encoded answer by copying it once into a buffer reserved at its length, a decoded
/// one with prost.
#[derive(Debug, Clone, Copy, Default)]
struct RangeEncoder;

impl Encoder for RangeEncoder {
    type Item = RangeAnswer;
    type Error = Status;

    fn encode(&mut self, item: RangeAnswer, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        match item {
            // Exactly as tonic's prost encoder writes it.
            RangeAnswer::Decoded(resp) => resp
                .encode(buf)
                .map_err(|e| Status::internal(e.to_string())),
            RangeAnswer::Encoded(answer) => {
                buf.reserve(answer.encoded_len());
                answer.write(buf).map_err(Status::from)
            }
        }
    }
}

#[cfg(test)]
#[path = "range_route_tests.rs"]
mod tests;
