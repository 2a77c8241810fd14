//! Tests of the front's `http/mod.rs` (its `tests` module, included from there by `#[path]`).

/// A client that sends half its headers is cut off once the header read timeout has passed
/// (on the paused clock), and not before.
#[tokio::test(start_paused = true)]
async fn a_client_trickling_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut client, server) = tokio::io::duplex(4096);
    let service = hyper::service::service_fn(|_req| async {
        Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
    });
    let conn = tokio::spawn(
        super::http1().serve_connection(hyper_util::rt::TokioIo::new(server), service),
    );
    client
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    tokio::time::sleep(super::READ_HEADER_TIMEOUT - std::time::Duration::from_secs(1)).await;
    assert!(!conn.is_finished(), "cut off before the timeout");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    // Without a timer hyper would wait forever: bounded here, so the test fails instead.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut rest = Vec::new();
        let _ = client.read_to_end(&mut rest).await;
        conn.await.unwrap()
    })
    .await;
    assert!(
        matches!(ended, Ok(Err(_))),
        "the connection was not cut off: {ended:?}"
    );
}

use super::*;

#[test]
fn grpc_is_told_from_http1_by_its_preface() {
    assert!(is_http2_preface(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    for h1 in [
        &b"GET /health HTTP/1.1\r\n"[..],
        b"POST /v3/kv/range",
        b"HEAD /",
    ] {
        assert!(!is_http2_preface(h1));
    }
    assert_eq!(cluster_version("3.5.13"), "3.5.0");
}
