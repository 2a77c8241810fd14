//! HTTP/1.1 beside gRPC on the client port: `/health`, `/version`, `/metrics` (parsed as
//! Prometheus text), the JSON gateway (JSON in and out, etcd's errors, the `Authorization`
//! token, a streamed watch), and `--listen-metrics-urls`. A tiny HTTP client keeps the test
//! free of another dependency.

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{Server, free_port};

/// One request with `Connection: close`: (status, body).
pub(crate) async fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: &str,
    auth: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let auth = auth.map_or(String::new(), |t| format!("Authorization: {t}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, rest.to_string())
}

/// `GET path`: (status, body).
pub(crate) async fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, "GET", path, "", None).await
}

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Prometheus text: every sample as `name{labels}` → value; HELP/TYPE lines must be well formed.
pub(crate) fn parse_prometheus(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let kind = parts.next().unwrap();
            assert!(kind == "HELP" || kind == "TYPE", "{line}");
            assert!(parts.next().is_some_and(|n| !n.is_empty()), "{line}");
            if kind == "TYPE" {
                let t = parts.next().unwrap();
                assert!(
                    ["gauge", "counter", "histogram", "summary", "untyped"].contains(&t),
                    "{line}"
                );
            }
            continue;
        }
        let (name, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad sample {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        assert!(
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_'),
            "{line}"
        );
        out.insert(name.to_string(), value);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_and_the_json_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_port = free_port();
    let metrics_url = format!("http://127.0.0.1:{metrics_port}");
    let srv = Server::start_with(dir.path(), &["--listen-metrics-urls", &metrics_url]);
    let _ = srv.client().await;
    let addr = srv.endpoint();

    let (status, body) = request(&addr, "GET", "/health", "", None).await;
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"health":"true","reason":""}"#)
    );
    let (status, body) = request(&addr, "GET", "/version", "", None).await;
    assert_eq!(status, 200);
    let want = format!(
        r#"{{"etcdserver":"{}","etcdcluster":"3.7.0""#,
        actcd::node::API_VERSION
    );
    assert!(body.starts_with(&want), "{body}");

    // The gateway: JSON in, etcd's JSON out.
    let put = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("foo"), b64("bar"));
    let (status, body) = request(&addr, "POST", "/v3/kv/put", &put, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""revision":"2""#),
        "64-bit integers as strings: {body}"
    );
    let range = format!(r#"{{"key":"{}"}}"#, b64("foo"));
    let (_, body) = request(&addr, "POST", "/v3/kv/range", &range, None).await;
    assert!(
        body.contains(&format!(r#""value":"{}""#, b64("bar"))),
        "{body}"
    );
    assert!(body.contains(r#""count":"1""#), "{body}");
    let (status, body) = request(&addr, "POST", "/v3/kv/put", r#"{"value":"eA=="}"#, None).await;
    assert_eq!(
        (status, body.as_str()),
        (
            400,
            r#"{"error":"etcdserver: key is not provided","code":3,"message":"etcdserver: key is not provided"}"#
        )
    );
    let (status, _) = request(&addr, "POST", "/v3/nope", "{}", None).await;
    assert_eq!(status, 404);

    // A streamed watch: created, then the event, one JSON line each.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let watch = format!(r#"{{"create_request":{{"key":"{}"}}}}"#, b64("foo"));
    let req = format!(
        "POST /v3/watch HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{watch}",
        watch.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let put = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("foo"), b64("baz"));
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut put_done = false;
    while !seen.contains(&b64("baz")) {
        let n = tokio::time::timeout_at(deadline, s.read(&mut buf))
            .await
            .expect("the watch streams its event")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        if seen.contains(r#""created":true"#) && !put_done {
            request(&addr, "POST", "/v3/kv/put", &put, None).await;
            put_done = true;
        }
    }
    assert!(seen.contains(r#"{"result":{"#), "{seen}");

    // Metrics on the client port and on --listen-metrics-urls, in Prometheus text.
    for a in [addr.clone(), format!("127.0.0.1:{metrics_port}")] {
        let (status, body) = request(&a, "GET", "/metrics", "", None).await;
        assert_eq!(status, 200);
        let samples = parse_prometheus(&body);
        assert_eq!(samples["etcd_server_has_leader"], 1.0);
        assert_eq!(samples["etcd_server_is_leader"], 1.0);
        assert!(samples["etcd_debugging_mvcc_current_revision"] >= 3.0);
        assert!(samples["etcd_mvcc_db_total_size_in_bytes"] > 0.0);
        assert!(samples["etcd_debugging_mvcc_keys_total"] >= 1.0);
        assert_eq!(samples["etcd_server_proposals_failed_total"], 0.0);
        assert!(samples["etcd_network_client_grpc_received_bytes_total"] > 0.0);
        assert!(samples["etcd_network_client_grpc_sent_bytes_total"] > 0.0);
        // Every actor answers its mailbox probe; the store has applied batches.
        for actor in [
            "preflight",
            "raft",
            "wal",
            "applier",
            "mvcc",
            "watch",
            "lessor",
        ] {
            let wait = samples[&format!(r#"actcd_actor_mailbox_wait_seconds{{actor="{actor}"}}"#)];
            assert!(wait < 2.0, "{actor} answered its probe");
            assert!(
                samples.contains_key(&format!(r#"actcd_actor_mailbox_depth{{actor="{actor}"}}"#))
            );
        }
        assert!(
            samples[r#"actcd_actor_handle_seconds_count{actor="mvcc",message="ApplyBatch"}"#]
                >= 1.0
        );
        assert!(
            samples
                .keys()
                .any(|k| k.starts_with("actcd_authn_outcomes_total"))
        );
        let (status, _) = request(&a, "GET", "/health", "", None).await;
        assert_eq!(status, 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_takes_the_token_from_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let _ = srv.client().await;
    let addr = srv.endpoint();
    for (path, body) in [
        (
            "/v3/auth/user/add",
            r#"{"name":"root","password":"rootpw"}"#,
        ),
        ("/v3/auth/role/add", r#"{"name":"root"}"#),
        ("/v3/auth/user/grant", r#"{"user":"root","role":"root"}"#),
        ("/v3/auth/enable", "{}"),
    ] {
        let (status, out) = request(&addr, "POST", path, body, None).await;
        assert_eq!(status, 200, "{path}: {out}");
    }
    let put = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("k"), b64("v"));
    let (status, body) = request(&addr, "POST", "/v3/kv/put", &put, None).await;
    // etcd's answer (the shared http-auth scenario compares it): InvalidArgument, so 400.
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("etcdserver: user name is empty"), "{body}");
    let (_, body) = request(
        &addr,
        "POST",
        "/v3/auth/authenticate",
        r#"{"name":"root","password":"rootpw"}"#,
        None,
    )
    .await;
    let token = body
        .split(r#""token":""#)
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let (status, body) = request(&addr, "POST", "/v3/kv/put", &put, Some(&token)).await;
    assert_eq!(status, 200, "{body}");

    // `Bearer <token>` is the same token.
    let bearer = format!("Bearer {token}");
    let (status, body) = request(&addr, "POST", "/v3/kv/put", &put, Some(&bearer)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(&addr, "POST", "/v3/kv/put", &put, Some("Bearer nonsense")).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("etcdserver: invalid auth token"), "{body}");

    // HTTP Basic: the password is checked, the user's permissions apply.
    for (path, body) in [
        (
            "/v3/auth/user/add",
            r#"{"name":"alice","password":"alicepw"}"#,
        ),
        ("/v3/auth/role/add", r#"{"name":"onlya"}"#),
        (
            "/v3/auth/role/grant",
            &format!(
                r#"{{"name":"onlya","perm":{{"permType":"READWRITE","key":"{}","range_end":"{}"}}}}"#,
                b64("a"),
                b64("b")
            ),
        ),
        ("/v3/auth/user/grant", r#"{"user":"alice","role":"onlya"}"#),
    ] {
        let (status, out) = request(&addr, "POST", path, body, Some(&token)).await;
        assert_eq!(status, 200, "{path}: {out}");
    }
    let basic = |user: &str, pw: &str| format!("Basic {}", b64(&format!("{user}:{pw}")));
    async fn put_as(addr: &str, body: &str, auth: &str) -> (u16, String) {
        request(addr, "POST", "/v3/kv/put", body, Some(auth)).await
    }
    let put_a = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("a1"), b64("v"));
    for _ in 0..2 {
        // The second time the password check is remembered; the answer is the same.
        let (status, body) = put_as(&addr, &put_a, &basic("alice", "alicepw")).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, body) = put_as(&addr, &put, &basic("alice", "alicepw")).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("etcdserver: permission denied"), "{body}");
    for bad in [
        basic("alice", "wrong"),
        basic("nobody", "x"),
        "Basic !!!".to_string(),
    ] {
        let (status, body) = request(&addr, "POST", "/v3/kv/put", &put_a, Some(&bad)).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body.contains("etcdserver: authentication failed, invalid user ID or password"),
            "{bad}: {body}"
        );
    }
    // A changed password is checked again (the remembered check was at an older revision).
    let (status, _) = request(
        &addr,
        "POST",
        "/v3/auth/user/changepw",
        r#"{"name":"alice","password":"newpw"}"#,
        Some(&token),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = put_as(&addr, &put_a, &basic("alice", "alicepw")).await;
    assert_eq!(status, 400, "the old password no longer works");
    let (status, _) = put_as(&addr, &put_a, &basic("alice", "newpw")).await;
    assert_eq!(status, 200);
    // Snapshot is for root only, through the gateway too (etcd 3.5.1's unconverted refusal:
    // code Unknown, the auth store's text).
    let (status, body) = request(
        &addr,
        "POST",
        "/v3/maintenance/snapshot",
        "{}",
        Some(&basic("alice", "newpw")),
    )
    .await;
    assert!(
        body.contains(r#""grpc_code":2,"http_code":500,"message":"auth: permission denied""#),
        "{status} {body}"
    );
}

/// Streamed gateway calls: `/v3/lease/keepalive` answers each request in the body, and
/// `/v3/maintenance/snapshot` streams the backend in base64 chunks counting down
/// `remaining_bytes`, the last line its SHA-256: together an etcd snapshot file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_streams_keepalives_and_snapshots() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut c = srv.client().await;
    let addr = srv.endpoint();
    let id = c.lease_grant(60, None).await.unwrap().id();
    c.put("k", "v", None).await.unwrap();
    let body = format!(r#"{{"ID":"{id}"}} {{"ID":{id}}}"#);
    let (status, out) = request(&addr, "POST", "/v3/lease/keepalive", &body, None).await;
    assert_eq!(status, 200, "{out}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert_eq!(l["result"]["ID"], id.to_string());
        assert_eq!(l["result"]["TTL"], "60");
    }
    // An unknown lease: TTL 0, left out as etcd's gateway leaves it.
    let (_, out) = request(
        &addr,
        "POST",
        "/v3/lease/keepalive",
        r#"{"ID":"12345"}"#,
        None,
    )
    .await;
    assert!(
        out.contains(r#""ID":"12345""#) && !out.contains("TTL"),
        "{out}"
    );

    // HashKV (etcd 3.6's gateway path; 3.5.1 has none): the same answer as over gRPC.
    let (status, out) = request(&addr, "POST", "/v3/maintenance/hashkv", "{}", None).await;
    assert_eq!(status, 200, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let grpc = c.hash_kv(0).await.unwrap();
    assert_eq!(v["hash"].as_u64(), Some(u64::from(grpc.hash())), "{out}");

    let (status, out) = request(&addr, "POST", "/v3/maintenance/snapshot", "{}", None).await;
    assert_eq!(status, 200);
    let mut file = Vec::new();
    let mut lines = out.lines().filter(|l| l.starts_with('{')).peekable();
    let mut last = None;
    let mut total = None;
    while let Some(l) = lines.next() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let blob = base64::engine::general_purpose::STANDARD
            .decode(v["result"]["blob"].as_str().unwrap())
            .unwrap();
        if lines.peek().is_none() {
            last = Some(blob);
        } else {
            file.extend_from_slice(&blob);
            let remaining: usize = v["result"]["remaining_bytes"]
                .as_str()
                .map_or(0, |r| r.parse().unwrap());
            let total = *total.get_or_insert(remaining + file.len());
            assert_eq!(remaining, total - file.len(), "remaining_bytes counts down");
        }
    }
    assert_eq!(file.len() % 4096, 0, "whole pages");
    assert_eq!(last.unwrap().len(), 32, "a SHA-256 at the end");
}

/// The gateway takes the token from `Grpc-Metadata-Token` too (any case), as etcd's
/// grpc-gateway passes that header on as the gRPC metadata `token`; with both headers the
/// metadata one wins (etcd's `AuthInfoFromCtx` reads `token` before `authorization`), taken as
/// given: a wrong one, an empty one or `Bearer <token>` is etcd's `invalid auth token` (401).
/// `Grpc-Metadata-Authorization` works as `Authorization`. Each answer was checked against
/// etcd 3.5.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_takes_the_token_from_grpc_metadata_token() {
    /// A POST with `headers`: (status, body).
    async fn post(addr: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let headers: String = headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap();
        (
            head.split(' ').nth(1).unwrap().parse().unwrap(),
            rest.to_string(),
        )
    }
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let _ = srv.client().await;
    let addr = srv.endpoint();
    let read_a = format!(
        r#"{{"name":"ra","perm":{{"permType":"READ","key":"{}","range_end":"{}"}}}}"#,
        b64("a"),
        b64("b")
    );
    let put_a1 = format!(r#"{{"key":"{}","value":"{}"}}"#, b64("a1"), b64("v"));
    for (path, body) in [
        (
            "/v3/auth/user/add",
            r#"{"name":"root","password":"rootpw"}"#,
        ),
        ("/v3/auth/role/add", r#"{"name":"root"}"#),
        ("/v3/auth/user/grant", r#"{"user":"root","role":"root"}"#),
        (
            "/v3/auth/user/add",
            r#"{"name":"alice","password":"alicepw"}"#,
        ),
        ("/v3/auth/role/add", r#"{"name":"ra"}"#),
        ("/v3/auth/role/grant", &read_a),
        ("/v3/auth/user/grant", r#"{"user":"alice","role":"ra"}"#),
        ("/v3/kv/put", &put_a1),
        ("/v3/auth/enable", "{}"),
    ] {
        let (status, out) = post(&addr, path, body, &[]).await;
        assert_eq!(status, 200, "{path}: {out}");
    }
    let token_of = |body: String| {
        body.split(r#""token":""#)
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string()
    };
    let (_, body) = post(
        &addr,
        "/v3/auth/authenticate",
        r#"{"name":"alice","password":"alicepw"}"#,
        &[],
    )
    .await;
    let alice = token_of(body);
    let (_, body) = post(
        &addr,
        "/v3/auth/authenticate",
        r#"{"name":"root","password":"rootpw"}"#,
        &[],
    )
    .await;
    let root = token_of(body);
    let range = format!(r#"{{"key":"{}"}}"#, b64("a1"));
    let bearer = format!("Bearer {alice}");
    let basic = format!("Basic {}", b64("root:rootpw"));
    // (headers, status): 200 reads a1, as alice may.
    let cases: Vec<(Vec<(&str, &str)>, u16)> = vec![
        (vec![("Grpc-Metadata-Token", &alice)], 200),
        (vec![("grpc-metadata-token", &alice)], 200),
        (vec![("GRPC-METADATA-TOKEN", &alice)], 200),
        (vec![("Grpc-Metadata-Token", "nonsense")], 401),
        (vec![("Grpc-Metadata-Token", "")], 401),
        (vec![("Grpc-Metadata-Token", &bearer)], 401),
        (
            vec![
                ("Grpc-Metadata-Token", &alice),
                ("Authorization", "nonsense"),
            ],
            200,
        ),
        (
            vec![
                ("Grpc-Metadata-Token", "nonsense"),
                ("Authorization", &alice),
            ],
            401,
        ),
        (
            vec![
                ("Grpc-Metadata-Token", &alice),
                ("Grpc-Metadata-Token", "nonsense"),
            ],
            200,
        ),
        (
            vec![
                ("Grpc-Metadata-Token", "nonsense"),
                ("Grpc-Metadata-Token", &alice),
            ],
            401,
        ),
        (
            vec![
                ("Grpc-Metadata-Token", "nonsense"),
                ("Authorization", &basic),
            ],
            401,
        ),
        (vec![("Grpc-Metadata-Authorization", &alice)], 200),
        // No token at all: etcd's answer to a request without a user.
        (vec![], 400),
    ];
    for (headers, want) in cases {
        let (status, body) = post(&addr, "/v3/kv/range", &range, &headers).await;
        assert_eq!(status, want, "{headers:?}: {body}");
        match want {
            200 => assert!(body.contains(r#""count":"1""#), "{headers:?}: {body}"),
            401 => assert!(
                body.contains(r#""message":"etcdserver: invalid auth token""#),
                "{headers:?}: {body}"
            ),
            _ => assert!(
                body.contains("etcdserver: user name is empty"),
                "{headers:?}: {body}"
            ),
        }
    }
    // The metadata token names the user whose permissions apply: alice may not write, even
    // with root's token in `Authorization`.
    let (status, body) = post(
        &addr,
        "/v3/kv/put",
        &put_a1,
        &[("Grpc-Metadata-Token", &alice), ("Authorization", &root)],
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("etcdserver: permission denied"), "{body}");
    let (status, body) = post(
        &addr,
        "/v3/kv/put",
        &put_a1,
        &[("Grpc-Metadata-Token", &root)],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}
