//! Regressions found by the hostile-input run (`actcd-robustness --hostile`): requests that
//! once took a member down or answered unlike etcd 3.5.1.

use std::time::Duration;

use super::Server;

/// A user or role name longer than LMDB's key limit (511 bytes) was accepted into the log, then
/// failed the backend commit of its batch: a fatal error, and the member shut down. Any client
/// could do it while auth was off. It is refused now when applied, and the member serves on.
#[tokio::test]
async fn a_user_or_role_name_past_the_key_limit_is_refused_and_the_member_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("before", "v", None).await.unwrap();
    let long = "n".repeat(3992);
    let err = c
        .user_add(long.as_str(), "pw", None)
        .await
        .expect_err("a 3992-byte user name");
    assert!(
        err.to_string()
            .contains("etcdserver: user name is too long"),
        "{err}"
    );
    let err = c
        .role_add(long.as_str())
        .await
        .expect_err("a 3992-byte role name");
    assert!(
        err.to_string()
            .contains("etcdserver: role name is too long"),
        "{err}"
    );
    // The longest name that fits is stored.
    c.user_add("u".repeat(511), "pw", None).await.unwrap();
    c.role_add("r".repeat(511)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let child = srv.child.as_mut().unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "the member is still running"
    );
    c.put("after", "v", None).await.unwrap();
    let r = c.get("before", None).await.unwrap();
    assert_eq!(r.kvs()[0].value(), b"v");
}

/// A call to a method the server does not have was refused with `Unimplemented` and no message
/// (tonic's default); etcd 3.5.1 (grpc-go) names what is unknown. A message over the receive
/// limit was `OutOfRange` (tonic's); etcd's is `ResourceExhausted`, the code clients back off on.
#[tokio::test]
async fn unknown_methods_and_oversized_messages_are_refused_as_etcd_refuses_them() {
    use actcd_proto::etcdserverpb::{RangeRequest, RangeResponse};
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", srv.endpoint()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let call = |path: &'static str| {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        async move {
            grpc.ready().await.unwrap();
            grpc.unary(
                tonic::Request::new(RangeRequest {
                    key: b"k".to_vec(),
                    ..Default::default()
                }),
                tonic::codegen::http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::<RangeRequest, RangeResponse>::default(),
            )
            .await
            .map(|_| ())
        }
    };
    for (path, code, message) in [
        (
            "/etcdserverpb.KV/Nope",
            tonic::Code::Unimplemented,
            "unknown method Nope for service etcdserverpb.KV",
        ),
        (
            "/etcdserverpb.Nope/Range",
            tonic::Code::Unimplemented,
            "unknown service etcdserverpb.Nope",
        ),
    ] {
        let s = call(path).await.expect_err(path);
        assert_eq!((s.code(), s.message()), (code, message), "{path}");
    }
    call("/etcdserverpb.KV/Range")
        .await
        .expect("a known method");
    // Made-up paths are not counted: a series each would grow /metrics without bound.
    let (_, metrics) = super::http::get(&srv.endpoint(), "/metrics").await;
    assert!(metrics.contains("grpc_method=\"Range\""), "{metrics}");
    assert!(!metrics.contains("Nope"), "{metrics}");

    // 3 MiB: past the 1.5 MiB request limit and its 512 KiB of framing slack.
    let err = c
        .put("big", vec![b'x'; 3 << 20], None)
        .await
        .expect_err("a 3 MiB put");
    match err {
        etcd_client::Error::GRpcStatus(s) => {
            assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
            assert!(
                s.message()
                    .starts_with("grpc: received message larger than max ("),
                "{s:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A client that stops sending on its Watch stream (half-close) kept nothing: the stream ended at
/// once. etcd keeps the stream and its watchers until the client goes away.
#[tokio::test]
async fn a_watch_stream_the_client_half_closes_keeps_delivering_events() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let (sender, mut stream) = c.watch("hc", None).await.unwrap().split();
    drop(sender); // the request side ends: a half-close
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.put("hc", "v", None).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let r = stream
                .message()
                .await
                .expect("no stream error")
                .expect("the stream is still open");
            if !r.events().is_empty() {
                return r;
            }
        }
    })
    .await
    .expect("an event within 5 s");
    assert_eq!(got.events()[0].kv().unwrap().value(), b"v");
}

/// The JSON gateway served its routes whatever the method (a `PUT /v3/lease/leases` answered the
/// leases). etcd's gateway serves only POST: another method is 405 on a route, 404 elsewhere, and
/// OPTIONS (a CORS preflight) 200 with no body.
#[tokio::test]
async fn the_gateway_answers_only_post_as_etcds_does() {
    use super::http::request;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    srv.client().await.put("k", "v", None).await.unwrap();
    let addr = srv.endpoint();
    for (method, path, want) in [
        ("PUT", "/v3/lease/leases", 405),
        ("GET", "/v3/kv/range", 405),
        ("DELETE", "/v3/kv/deleterange", 405),
        ("GET", "/v3/kv/nope", 404),
        ("OPTIONS", "/v3/kv/range", 200),
        ("POST", "/v3/lease/leases", 200),
    ] {
        let (status, body) = request(&addr, method, path, "{}", None).await;
        assert_eq!(status, want, "{method} {path}: {body}");
    }
}

/// A gateway watch whose HTTP/1.1 client hung up right after the response head stayed open
/// (about 40 KB each) while no event came: the task that turned answers into lines waited only
/// on the watch. Every such stream must be closed in the hub once its client is gone.
#[tokio::test]
async fn gateway_watches_whose_clients_hang_up_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const STREAMS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    srv.client().await.put("k", "v", None).await.unwrap();
    let addr = srv.endpoint();
    let body = r#"{"create_request":{"key":"cXVpZXQ="}}"#;
    for _ in 0..STREAMS {
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let req = format!(
            "POST /v3/watch HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).await.unwrap();
        assert!(head[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &head[..n]);
        drop(s);
    }
    let closed = "actcd_actor_handle_seconds_count{actor=\"watch\",message=\"CloseStream\"}";
    let opened = "actcd_actor_handle_seconds_count{actor=\"watch\",message=\"OpenStream\"}";
    let mut last = (0.0, 0.0);
    for _ in 0..100 {
        let (_, text) = super::http::get(&addr, "/metrics").await;
        let m = super::http::parse_prometheus(&text);
        last = (
            m.get(opened).copied().unwrap_or(0.0),
            m.get(closed).copied().unwrap_or(0.0),
        );
        if last.0 >= STREAMS as f64 && last.1 >= last.0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("streams (opened, closed) = {last:?}: a stream outlived its client");
}
