//! grpc-gateway v1.16's side of a JSON call, as etcd 3.5's gateway runs it: proto3 JSON in and
//! out of request and response messages ([`Messages`]), the HTTP status for each gRPC code
//! ([`http_status`]), the error bodies ([`error_answer`], [`stream_error`]), the requests of a
//! bidirectional call read from one body ([`Messages::stream_requests`]), and which header a
//! call's credentials come from ([`AuthHeader`]). Messages are found by name in a
//! `prost_reflect::DescriptorPool` the caller gives; nothing here knows etcd's messages.

use http::StatusCode;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor, SerializeOptions};
use tonic::Status;

/// A gateway answer: HTTP status and JSON body.
pub type Answer = (StatusCode, String);

/// grpc-gateway's `HTTPStatusFromCode`.
pub fn http_status(code: tonic::Code) -> StatusCode {
    use tonic::Code::*;
    match code {
        Ok => StatusCode::OK,
        Cancelled => StatusCode::REQUEST_TIMEOUT,
        InvalidArgument | FailedPrecondition | OutOfRange => StatusCode::BAD_REQUEST,
        DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        NotFound => StatusCode::NOT_FOUND,
        AlreadyExists | Aborted => StatusCode::CONFLICT,
        PermissionDenied => StatusCode::FORBIDDEN,
        Unauthenticated => StatusCode::UNAUTHORIZED,
        ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Unknown | Internal | DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// grpc-gateway's error body: `{"error","code","message"}` with the code's HTTP status.
pub fn error_answer(s: &Status) -> Answer {
    let msg = serde_json::Value::String(s.message().to_string());
    (
        http_status(s.code()),
        format!(
            "{{\"error\":{msg},\"code\":{},\"message\":{msg}}}",
            s.code() as i32
        ),
    )
}

/// grpc-gateway's error in a streamed answer (a gRPC stream that failed, before or after its
/// first message): `{"error":{"grpc_code","http_code","message","http_status"}}`, no line break
/// after it; the HTTP status is the code's when nothing was written before.
pub fn stream_error(s: &Status) -> Answer {
    let status = http_status(s.code());
    let msg = serde_json::Value::String(s.message().to_string());
    let text = serde_json::Value::String(status.canonical_reason().unwrap_or("").to_string());
    (
        status,
        format!(
            "{{\"error\":{{\"grpc_code\":{},\"http_code\":{},\"message\":{msg},\"http_status\":{text}}}}}",
            s.code() as i32,
            status.as_u16()
        ),
    )
}

/// The messages a gateway reads and writes: a descriptor pool (`None` if it could not be
/// decoded: every call is then `Internal`, `descriptors unavailable`) and the package a bare
/// message name is looked up in.
pub struct Messages {
    pool: Option<DescriptorPool>,
    package: String,
}

impl Messages {
    /// The messages of an encoded `FileDescriptorSet`; a name without a `.` is one of
    /// `package`'s.
    pub fn decode(file_descriptor_set: &[u8], package: &str) -> Self {
        Messages {
            pool: DescriptorPool::decode(file_descriptor_set).ok(),
            package: package.to_string(),
        }
    }

    /// The descriptor of the message `name`: one of the package's, or a full name.
    pub fn descriptor(&self, name: &str) -> Result<MessageDescriptor, Status> {
        self.pool
            .as_ref()
            .ok_or_else(|| Status::internal("descriptors unavailable"))?
            .get_message_by_name(&if name.contains('.') {
                name.to_string()
            } else {
                format!("{}.{name}", self.package)
            })
            .ok_or_else(|| Status::internal(format!("no descriptor for {name}")))
    }

    /// Decodes a JSON body into the request message `name` as grpc-gateway decodes a unary
    /// call's body ([`crate::Decoder`], [`crate::decode_message`]): its first JSON value, an
    /// empty body an empty request; a refusal is `InvalidArgument` with Go's words.
    pub fn from_json<M: prost::Message + Default>(
        &self,
        body: &[u8],
        name: &str,
    ) -> Result<M, Status> {
        let value = crate::Decoder::new(body)
            .next_value()
            .map_err(Status::invalid_argument)?;
        self.from_value(value.unwrap_or(b"null"), name)
            .map_err(Status::invalid_argument)
    }

    /// One JSON value (its text) as the message `name`, or Go's refusal.
    pub fn from_value<M: prost::Message + Default>(
        &self,
        value: &[u8],
        name: &str,
    ) -> Result<M, String> {
        let desc = self.descriptor(name).map_err(|s| s.message().to_string())?;
        let dynamic = crate::decode_message(&desc, value)?;
        M::decode(prost::Message::encode_to_vec(&dynamic).as_slice()).map_err(|e| e.to_string())
    }

    /// Encodes a response message `name` as grpc-gateway's `JSONPb{OrigName: true}` writes it:
    /// original (snake_case) field names, 64-bit integers as strings, bytes in base64, enums by
    /// name, default values left out. A `string` field whose bytes are not UTF-8 (a field that
    /// is `bytes` in the caller's message and `string` in the descriptor) is written as Go
    /// writes it ([`go_lossy_strings`]).
    pub fn to_json<M: prost::Message>(&self, msg: &M, name: &str) -> Result<String, Status> {
        let desc = self.descriptor(name)?;
        let encoded = msg.encode_to_vec();
        let dynamic = match DynamicMessage::decode(desc.clone(), encoded.as_slice()) {
            Ok(dynamic) => dynamic,
            Err(e) => go_lossy_strings(&desc, &encoded)
                .and_then(|fixed| DynamicMessage::decode(desc, fixed.as_slice()).ok())
                .ok_or_else(|| Status::internal(e.to_string()))?,
        };
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::new(&mut out);
        dynamic
            .serialize_with_options(
                &mut ser,
                &SerializeOptions::new()
                    .use_proto_field_name(true)
                    .skip_default_fields(true),
            )
            .map_err(|e| Status::internal(e.to_string()))?;
        String::from_utf8(out).map_err(|e| Status::internal(e.to_string()))
    }

    /// The requests of a bidirectional call, read from the body one JSON value after another
    /// as grpc-gateway reads them. A first request that can't be decoded fails the call (500,
    /// code Unknown: grpc-gateway returns the decoder's error as it is); a later one ends the
    /// requests, and what came before is served, with nothing said about it in the stream
    /// (etcd 3.5.1 writes nothing for it either).
    pub fn stream_requests<M: prost::Message + Default>(
        &self,
        body: &[u8],
        name: &str,
    ) -> Result<Vec<M>, Answer> {
        let mut decoder = crate::Decoder::new(body);
        let mut out = Vec::new();
        loop {
            let next = decoder
                .next_value()
                .and_then(|v| v.map(|v| self.from_value(v, name)).transpose());
            match next {
                Ok(Some(request)) => out.push(request),
                Ok(None) => return Ok(out),
                Err(e) if out.is_empty() => return Err(error_answer(&Status::unknown(e))),
                Err(_) => return Ok(out),
            }
        }
    }
}

/// `text` as Go's `encoding/json` writes a string that is not UTF-8: every byte outside valid
/// UTF-8 becomes one U+FFFD (Rust's `from_utf8_lossy` folds some runs of such bytes into one).
fn go_lossy(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for chunk in text.utf8_chunks() {
        out.push_str(chunk.valid());
        out.extend(std::iter::repeat_n('\u{FFFD}', chunk.invalid().len()));
    }
    out
}

/// `encoded`, a message of type `desc` as the descriptors for JSON see it, with the bytes of
/// every `string` field that are not UTF-8 replaced as Go's JSON encoder replaces them (one
/// U+FFFD each), so a message that holds such text (etcd's user and role names are bytes in
/// its messages, `string` to JSON) is written as Go's gateway writes it. `None` if `encoded`
/// is not a well-formed message.
pub fn go_lossy_strings(desc: &MessageDescriptor, mut encoded: &[u8]) -> Option<Vec<u8>> {
    use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
    use prost_reflect::Kind;
    let mut out = Vec::with_capacity(encoded.len());
    while !encoded.is_empty() {
        let (tag, wire_type) = decode_key(&mut encoded).ok()?;
        encode_key(tag, wire_type, &mut out);
        let fixed = match wire_type {
            WireType::Varint => {
                encode_varint(decode_varint(&mut encoded).ok()?, &mut out);
                continue;
            }
            WireType::SixtyFourBit => 8,
            WireType::ThirtyTwoBit => 4,
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut encoded).ok()?).ok()?;
                let data = encoded.get(..len)?;
                encoded = &encoded[len..];
                let kind = desc.get_field(tag).map(|f| f.kind());
                let value = match kind {
                    Some(Kind::String) => go_lossy(data).into_bytes(),
                    Some(Kind::Message(m)) => go_lossy_strings(&m, data)?,
                    _ => data.to_vec(),
                };
                encode_varint(value.len() as u64, &mut out);
                out.extend_from_slice(&value);
                continue;
            }
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        out.extend_from_slice(encoded.get(..fixed)?);
        encoded = &encoded[fixed..];
    }
    Some(out)
}

/// The header a gateway request's credentials come from. etcd's grpc-gateway passes every
/// `Grpc-Metadata-<name>` header (any case) on as gRPC metadata `<name>`, and `Authorization`
/// as metadata `authorization`; etcd's `AuthInfoFromCtx` reads metadata `token` first, then
/// `authorization`, each value as the token itself, the first of several. So a
/// `Grpc-Metadata-Token` header wins over `Authorization` (checked against etcd 3.5.1: a good
/// token there and a bad one in `Authorization` reads, the other way round is `invalid auth
/// token`); `Grpc-Metadata-Authorization` counts when no `Authorization` is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AuthHeader {
    #[default]
    None,
    /// The first `Grpc-Metadata-Token` value, the token as given (empty, or not text: a token
    /// no user has).
    Token(String),
    /// `Authorization` (else `Grpc-Metadata-Authorization`): a token, `Bearer <token>`, or
    /// HTTP `Basic` credentials.
    Authorization(String),
}

impl AuthHeader {
    /// The credentials header of a request with `headers`.
    pub fn of(headers: &http::HeaderMap) -> Self {
        let text = |v: &http::HeaderValue| v.to_str().map(str::to_string);
        if let Some(v) = headers.get("grpc-metadata-token") {
            return AuthHeader::Token(text(v).unwrap_or_default());
        }
        headers
            .get(http::header::AUTHORIZATION)
            .or_else(|| headers.get("grpc-metadata-authorization"))
            .and_then(|v| text(v).ok())
            .map_or(AuthHeader::None, AuthHeader::Authorization)
    }
}

#[cfg(test)]
#[path = "gateway_tests.rs"]
mod tests;
