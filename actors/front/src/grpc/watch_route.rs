//! `/etcdserverpb.Watch/Watch` served in front of the generated Watch service, with a codec
//! that writes the events the watch hub shared among watchers straight from the shared copy.
//!
//! **Why a route of our own.** A put under a prefix that 100,000 watchers watch becomes
//! 100,000 responses, one per watch id, as etcd sends them. tonic's prost codec needs each as a
//! `WatchResponse` that owns its events: a copy of every event (its key and value) per watcher,
//! made only to be encoded and freed, and each encoded again per watcher. This codec encodes
//! the response's own fields with prost and then copies the shared events' wire form (the
//! `events` field, 11, the message's last, encoded once per run of events), which is the byte
//! string prost writes for the whole message. The route decodes requests, applies the size
//! limits and answers errors as the generated method does; it serves the same stream as
//! `WatchService::watch` ([`crate::grpc::watch::open_stream_as`]).

use std::convert::Infallible;
use std::sync::Arc;

use actcd_proto::etcdserverpb::watch_server::WatchServer;
use actcd_proto::etcdserverpb::{WatchRequest, WatchResponse};
use futures::Stream;
use prost::Message;
use tokio_stream::wrappers::ReceiverStream;
use tonic::body::Body;
use tonic::codec::{EncodeBuf, Encoder, Streaming};
use tonic::codegen::BoxFuture;
use tonic::server::StreamingService;
use tonic::{Request, Response, Status};

use crate::grpc::own_method::{OwnCodec, OwnMethod, WithOwnMethod};
use crate::grpc::watch::{WatchOut, WatchService};
use crate::pipeline::Pipeline;

/// The Watch service: its one method here, anything else (unknown methods) by the generated
/// server.
pub(crate) type WatchRoutes = WithOwnMethod<WatchServer<WatchService>, WatchMethod>;

pub(crate) fn watch_routes(pipeline: Arc<Pipeline>, max_decoding: usize) -> WatchRoutes {
    let watch = WatchServer::new(WatchService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(max_decoding)
    .max_encoding_message_size(usize::MAX);
    WithOwnMethod::new(watch, WatchMethod { pipeline }, max_decoding)
}

impl OwnMethod for WatchMethod {
    const PATH: &'static str = "/etcdserverpb.Watch/Watch";

    fn serve(
        &self,
        req: http::Request<Body>,
        max_decoding: usize,
    ) -> BoxFuture<http::Response<Body>, Infallible> {
        let method = self.clone();
        Box::pin(async move {
            let mut grpc = OwnCodec::<WatchEncoder, WatchRequest>::grpc(max_decoding);
            Ok(grpc.streaming(method, req).await)
        })
    }
}

type OutStream = std::pin::Pin<Box<dyn Stream<Item = Result<WatchOut, Status>> + Send>>;

/// The Watch method itself, as `WatchService::watch` is.
#[derive(Clone)]
pub(crate) struct WatchMethod {
    pipeline: Arc<Pipeline>,
}

impl StreamingService<WatchRequest> for WatchMethod {
    type Response = WatchOut;
    type ResponseStream = OutStream;
    type Future = BoxFuture<Response<OutStream>, Status>;

    fn call(&mut self, req: Request<Streaming<WatchRequest>>) -> Self::Future {
        let pipeline = self.pipeline.clone();
        Box::pin(async move {
            let creds = pipeline.auth.credentials(&req);
            let inbound = crate::grpc::watch::client_requests(req.into_inner());
            let rx =
                crate::grpc::watch::open_stream_as::<WatchOut>(pipeline, creds, inbound).await?;
            Ok(Response::new(Box::pin(ReceiverStream::new(rx)) as OutStream))
        })
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct WatchEncoder;

impl Encoder for WatchEncoder {
    type Item = WatchOut;
    type Error = Status;

    fn encode(&mut self, item: WatchOut, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        encode(&item, buf)
    }
}

/// `out` as prost writes the whole message: its own fields (events last), then the shared
/// events as more of field 11, copied from their wire form (`SharedEvents::wire`, encoded once
/// for all the responses that share them).
fn encode(out: &WatchOut, buf: &mut impl bytes::BufMut) -> Result<(), Status> {
    let shared = out.shared.as_ref().map_or(&[][..], |s| s.wire());
    let need = out.response.encoded_len() + shared.len();
    if buf.remaining_mut() < need {
        return Err(Status::internal(format!(
            "watch response of {need} bytes does not fit its buffer"
        )));
    }
    out.response
        .encode(buf)
        .map_err(|e| Status::internal(e.to_string()))?;
    buf.put_slice(shared);
    Ok(())
}

impl From<WatchResponse> for WatchOut {
    fn from(response: WatchResponse) -> Self {
        Self {
            response,
            shared: None,
        }
    }
}

#[cfg(test)]
#[path = "watch_route_tests.rs"]
mod tests;
