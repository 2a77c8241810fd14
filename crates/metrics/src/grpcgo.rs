//! tonic's trailers-only refusals rewritten as grpc-go (etcd 3.5.1's) words them: unknown
//! services and methods, malformed method names, and messages over the receive limit, with
//! gRPC's percent-encoding of `grpc-message`.

use crate::requests::SERVICES;

/// Rewrites the two trailers-only refusals tonic words unlike grpc-go (found by the hostile-input
/// run; etcd 3.5.1's answers):
/// - an unknown service or method: tonic sends `Unimplemented` with no message; grpc-go says
///   `unknown service S`, `unknown method M for service S`, or for a path without a second
///   `/` `malformed method name: "P"` (with code `ResourceExhausted`, as grpc-go 1.41 has it);
/// - a message over the receive limit: tonic sends `OutOfRange` "Error, decoded message length
///   too large: found N bytes, the limit is: L bytes"; grpc-go `ResourceExhausted` "grpc:
///   received message larger than max (N vs. L)", the code clients retry and back off on.
pub fn as_grpc_go_answers(path: &str, headers: &mut http::HeaderMap) {
    let code = headers.get("grpc-status").map(|v| v.as_bytes());
    let message = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let rewritten = match code {
        Some(b"12") if message.is_empty() => {
            let sm = path.strip_prefix('/').unwrap_or(path);
            Some(match sm.rfind('/') {
                // grpc-go 1.41 (etcd 3.5.1's) says ResourceExhausted here.
                None => (
                    tonic::Code::ResourceExhausted,
                    format!("malformed method name: {path:?}"),
                ),
                Some(pos) if SERVICES.contains(&&sm[..pos]) => (
                    tonic::Code::Unimplemented,
                    format!(
                        "unknown method {} for service {}",
                        &sm[pos + 1..],
                        &sm[..pos]
                    ),
                ),
                Some(pos) => (
                    tonic::Code::Unimplemented,
                    format!("unknown service {}", &sm[..pos]),
                ),
            })
        }
        Some(b"11") => {
            let decoded = percent_decode(message);
            decoded
                .strip_prefix("Error, decoded message length too large: found ")
                .and_then(|rest| rest.split_once(" bytes, the limit is: "))
                .map(|(found, limit)| {
                    (
                        tonic::Code::ResourceExhausted,
                        format!(
                            "grpc: received message larger than max ({found} vs. {})",
                            limit.trim_end_matches(" bytes")
                        ),
                    )
                })
        }
        _ => None,
    };
    if let Some((code, message)) = rewritten
        && let Ok(v) = http::HeaderValue::from_str(&percent_encode(&message))
    {
        headers.insert("grpc-status", http::HeaderValue::from(code as i32));
        headers.insert("grpc-message", v);
    }
}

/// gRPC's percent-encoding of `grpc-message`: bytes outside printable ASCII, and `%`.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The inverse of [`percent_encode`] (what grpc-go's clients do to `grpc-message`); a `%`
/// not followed by two hex digits stays as it is.
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[path = "grpcgo_tests.rs"]
mod tests;
