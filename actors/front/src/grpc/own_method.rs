//! A generated gRPC service with one of its methods served by a handler of ours: Range
//! (`range_route.rs`) and Watch (`watch_route.rs`) write their answers with codecs of their own,
//! and every other path goes to the generated server unchanged.

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codegen::BoxFuture;
use tonic::server::NamedService;

/// The one method a [`WithOwnMethod`] serves itself.
pub(crate) trait OwnMethod: Clone + Send + 'static {
    /// Its gRPC path, `/package.Service/Method`.
    const PATH: &'static str;

    /// One call: decode the request (at most `max_decoding` bytes, as the generated server's
    /// limit), answer, encode.
    fn serve(
        &self,
        req: http::Request<Body>,
        max_decoding: usize,
    ) -> BoxFuture<http::Response<Body>, Infallible>;
}

/// `generated`, except for `M::PATH`, which `own` serves.
#[derive(Clone)]
pub(crate) struct WithOwnMethod<S, M> {
    generated: S,
    own: M,
    /// The generated server's `max_decoding_message_size`, for the own method's requests too.
    max_decoding: usize,
}

impl<S, M> WithOwnMethod<S, M> {
    pub(crate) fn new(generated: S, own: M, max_decoding: usize) -> Self {
        Self {
            generated,
            own,
            max_decoding,
        }
    }
}

impl<S: NamedService, M> NamedService for WithOwnMethod<S, M> {
    const NAME: &'static str = S::NAME;
}

impl<S, M> tower_service::Service<http::Request<Body>> for WithOwnMethod<S, M>
where
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
            Future = BoxFuture<http::Response<Body>, Infallible>,
        >,
    M: OwnMethod,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        if req.uri().path() == M::PATH {
            self.own.serve(req, self.max_decoding)
        } else {
            self.generated.call(req)
        }
    }
}

/// The codec of an own method: requests `Req` decoded by prost as the generated server does,
/// answers written by the method's own encoder `E`.
pub(crate) struct OwnCodec<E, Req>(std::marker::PhantomData<fn() -> (E, Req)>);

impl<E, Req> OwnCodec<E, Req> {
    pub(crate) fn new() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<E, Req> OwnCodec<E, Req>
where
    Self: tonic::codec::Codec,
{
    /// tonic's server side of a method over this codec, as the generated method sets it up:
    /// no compression either way, requests up to `max_decoding` bytes, answers of any size.
    pub(crate) fn grpc(max_decoding: usize) -> tonic::server::Grpc<Self> {
        tonic::server::Grpc::new(Self::new())
            .apply_max_message_size_config(Some(max_decoding), Some(usize::MAX))
    }
}

impl<E, Req> tonic::codec::Codec for OwnCodec<E, Req>
where
    E: tonic::codec::Encoder<Error = tonic::Status> + Default + Send + 'static,
    E::Item: Send + 'static,
    Req: prost::Message + Default + Send + 'static,
{
    type Encode = E::Item;
    type Decode = Req;
    type Encoder = E;
    type Decoder = tonic_prost::ProstDecoder<Req>;

    fn encoder(&mut self) -> E {
        E::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstCodec::<Req, Req>::raw_decoder(tonic::codec::BufferSettings::default())
    }
}
