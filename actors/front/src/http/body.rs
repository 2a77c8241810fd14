//! The HTTP/1.1 side's response body, shared by the router and the routes under it.

use bytes::Bytes;

/// Every response body: whole, or streamed (the gateway's watch).
pub type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;
