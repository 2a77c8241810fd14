//! etcd's v2 API behind `--enable-v2`: what the differential script (`tests/compat/v2.sh`)
//! cannot compare against etcd — the v2 auth RFC's `/v2/security` workflow and glob patterns,
//! v2 state across restarts (the journal and its checkpoint), TTL expiry on every member of a
//! cluster, v2 auth next to v3 auth, streamed watches, membership, and etcdctl v2 over TLS.
//!
//! Requests go over a small HTTP/1.1 client of this file (headers, form bodies, chunked
//! replies, keep-alive connections); servers are real `actcd` processes on 127.0.0.1.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::cluster::running_cluster;
use crate::{Server, free_port};

const V2: &[&str] = &["--enable-v2"];
const FORM: &str = "application/x-www-form-urlencoded";
const JSON: &str = "application/json";

/// A whole HTTP reply.
#[derive(Debug, Clone)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {:?}", self.status, self.body))
    }

    /// `X-Etcd-Index`.
    fn index(&self) -> u64 {
        self.header("X-Etcd-Index")
            .unwrap_or_else(|| panic!("no X-Etcd-Index: {self:?}"))
            .parse()
            .unwrap()
    }
}

/// One HTTP/1.1 connection, kept alive between requests.
struct Conn {
    addr: String,
    io: BufReader<TcpStream>,
}

impl Conn {
    async fn open(addr: &str) -> Conn {
        Conn {
            addr: addr.to_string(),
            io: BufReader::new(TcpStream::connect(addr).await.unwrap()),
        }
    }

    /// Writes a request; `close` asks the server to close after the reply.
    async fn send(
        &mut self,
        method: &str,
        path: &str,
        auth: Option<&str>,
        body: Option<(&str, &str)>,
        close: bool,
    ) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.addr);
        if let Some(a) = auth {
            req.push_str(&format!("Authorization: {a}\r\n"));
        }
        let (ctype, body) = body.unwrap_or(("", ""));
        if !ctype.is_empty() {
            req.push_str(&format!("Content-Type: {ctype}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        if close {
            req.push_str("Connection: close\r\n");
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.io.get_mut().write_all(req.as_bytes()).await.unwrap();
    }

    /// The status line and headers of the next reply.
    async fn head(&mut self) -> (u16, Vec<(String, String)>) {
        let mut line = String::new();
        self.io.read_line(&mut line).await.unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.io.read_line(&mut h).await.unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        (status, headers)
    }

    /// The next chunk of a chunked body (`None` at its end).
    async fn chunk(&mut self) -> Option<Vec<u8>> {
        let mut size = String::new();
        self.io.read_line(&mut size).await.unwrap();
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
        let mut data = vec![0; n];
        self.io.read_exact(&mut data).await.unwrap();
        let mut crlf = String::new();
        self.io.read_line(&mut crlf).await.unwrap();
        (n > 0).then_some(data)
    }

    /// The next whole reply (HEAD replies have no body).
    async fn reply(&mut self, head_only: bool) -> Resp {
        let (status, headers) = self.head().await;
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if head_only {
        } else if get("Transfer-Encoding").is_some_and(|t| t.contains("chunked")) {
            while let Some(c) = self.chunk().await {
                body.extend(c);
            }
        } else if let Some(n) = get("Content-Length") {
            body = vec![0; n.parse().unwrap()];
            self.io.read_exact(&mut body).await.unwrap();
        } else {
            self.io.read_to_end(&mut body).await.unwrap();
        }
        Resp {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    }

    async fn call(
        &mut self,
        method: &str,
        path: &str,
        auth: Option<&str>,
        body: Option<(&str, &str)>,
    ) -> Resp {
        self.send(method, path, auth, body, false).await;
        self.reply(method == "HEAD").await
    }
}

/// One request on a fresh connection.
async fn call(
    addr: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<(&str, &str)>,
) -> Resp {
    let mut c = Conn::open(addr).await;
    c.send(method, path, auth, body, true).await;
    c.reply(method == "HEAD").await
}

async fn get(addr: &str, path: &str, auth: Option<&str>) -> Resp {
    call(addr, "GET", path, auth, None).await
}

/// `PUT` (or `POST`) of a form to `/v2/keys...`.
async fn form(addr: &str, method: &str, path: &str, body: &str, auth: Option<&str>) -> Resp {
    call(addr, method, path, auth, Some((FORM, body))).await
}

/// `PUT` of a JSON body (the auth APIs).
async fn put_json(addr: &str, path: &str, body: &str, auth: Option<&str>) -> Resp {
    call(addr, "PUT", path, auth, Some((JSON, body))).await
}

fn basic(user: &str, pw: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

/// Waits until `/v2/keys/` answers on `addr`.
async fn v2_ready(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut c) = TcpStream::connect(addr).await.map(|s| Conn {
            addr: addr.to_string(),
            io: BufReader::new(s),
        }) {
            c.send("GET", "/v2/keys/", None, None, true).await;
            if let Ok(Ok(r)) = tokio::time::timeout(
                Duration::from_secs(2),
                tokio::spawn(async move { c.reply(false).await }),
            )
            .await
                && r.status == 200
            {
                return;
            }
        }
        assert!(Instant::now() < deadline, "v2 on {addr} never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn start_v2(dir: &std::path::Path) -> Server {
    let srv = Server::start_with(dir, V2);
    let _ = srv.client().await;
    v2_ready(&srv.endpoint()).await;
    srv
}

/// etcd's `/v2/keys` refusal, exactly.
fn assert_unauthorized(r: &Resp, what: &str) {
    assert_eq!(r.status, 401, "{what}: {r:?}");
    assert_eq!(
        r.body,
        "{\"errorCode\":110,\"message\":\"The request requires user authentication\",\"cause\":\"Insufficient credentials\",\"index\":0}\n",
        "{what}"
    );
    assert_eq!(r.header("X-Etcd-Index"), Some("0"), "{what}");
}

/// Creates `root` (password `rootpw`) over `/v2/auth` and enables v2 auth.
async fn enable_with_root(addr: &str) {
    let r = put_json(
        addr,
        "/v2/auth/users/root",
        r#"{"user":"root","password":"rootpw"}"#,
        None,
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = call(addr, "PUT", "/v2/auth/enable", None, None).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = get(addr, "/v2/auth/enable", None).await;
    assert_eq!(r.body, "{\"enabled\":true}\n");
}

/// Removes every `"ttl"` member (it counts down with the wall clock).
fn without_ttl(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("ttl");
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// Every node under `v` (a `get` answer's `node`), depth first.
fn all_nodes(v: &Value, out: &mut Vec<Value>) {
    out.push(v.clone());
    if let Some(children) = v["nodes"].as_array() {
        for c in children {
            all_nodes(c, out);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_is_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let _ = srv.client().await;
    let addr = srv.endpoint();
    for (method, body) in [("GET", None), ("PUT", Some((FORM, "value=bar")))] {
        let r = call(&addr, method, "/v2/keys/foo", None, body).await;
        assert_eq!((r.status, r.body.as_str()), (404, "404 page not found\n"));
    }
    for path in ["/v2/members", "/v2/security/users", "/v2/auth/enable"] {
        let r = get(&addr, path, None).await;
        assert_eq!(r.status, 404, "{path}: {r:?}");
    }
    drop(srv);

    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();
    let r = form(&addr, "PUT", "/v2/keys/foo", "value=bar", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let set = r.json();
    assert_eq!(set["action"], "set");
    assert_eq!(set["node"]["key"], "/foo");
    assert_eq!(set["node"]["value"], "bar");
    let index = r.index();
    assert_eq!(set["node"]["modifiedIndex"].as_u64(), Some(index));
    assert_eq!(set["node"]["createdIndex"].as_u64(), Some(index));
    for h in ["X-Etcd-Cluster-Id", "X-Raft-Index", "X-Raft-Term"] {
        assert!(r.header(h).is_some_and(|v| !v.is_empty()), "{h}: {r:?}");
    }
    assert_eq!(r.header("Content-Type"), Some("application/json"));

    let r = get(&addr, "/v2/keys/foo", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.index(), index);
    let got = r.json();
    assert_eq!(got["action"], "get");
    assert_eq!(got["node"], set["node"]);
    let r = get(&addr, "/v2/keys/nope", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["errorCode"], 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rfc_example_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();

    // etcd's rule, not the RFC's: no default root:root, and enabling needs a root user.
    let r = call(&addr, "PUT", "/v2/auth/enable", None, None).await;
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.body.contains("No root user available"), "{r:?}");
    enable_with_root(&addr).await;
    let r = get(&addr, "/v2/security/users", Some(&basic("root", "root"))).await;
    assert_eq!(r.status, 403, "root:root is no default: {r:?}");

    // Change root's password through the RFC's endpoint.
    let root_old = basic("root", "rootpw");
    let r = put_json(
        &addr,
        "/v2/security/users/root/password",
        r#"{"user":"root","password":"betterRootPW!"}"#,
        Some(&root_old),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["user"], "root");
    assert!(
        r.header("ETag")
            .is_some_and(|e| e.starts_with("\"users/root:"))
    );
    let r = get(&addr, "/v2/security/users", Some(&root_old)).await;
    assert_eq!(r.status, 403, "the old password is gone: {r:?}");
    let root = basic("root", "betterRootPW!");

    // Two roles, each on its own prefix.
    for app in ["rocket", "fleet"] {
        let body = format!(
            r#"{{"role":"{app}","permissions":{{"kv":{{"read":["/{app}/*"],"write":["/{app}/*"]}}}}}}"#
        );
        let r = put_json(
            &addr,
            &format!("/v2/security/roles/{app}"),
            &body,
            Some(&root),
        )
        .await;
        assert_eq!(r.status, 201, "{r:?}");
        let role = r.json();
        assert_eq!(role["role"], app);
        assert_eq!(role["permissions"]["kv"]["read"][0], format!("/{app}/*"));
    }
    // Two users, one role each (the RFC's create: 201, empty body, an ETag).
    for (user, app) in [("alice", "rocket"), ("bob", "fleet")] {
        let body = format!(r#"{{"user":"{user}","password":"{user}pw","roles":["{app}"]}}"#);
        let r = put_json(
            &addr,
            &format!("/v2/security/users/{user}"),
            &body,
            Some(&root),
        )
        .await;
        assert_eq!((r.status, r.body.as_str()), (201, ""), "{r:?}");
        assert!(
            r.header("ETag")
                .is_some_and(|e| e.starts_with(&format!("\"users/{user}:"))),
            "{r:?}"
        );
    }
    // Creating an existing user: 409.
    let r = put_json(
        &addr,
        "/v2/security/users/alice",
        r#"{"user":"alice","password":"other"}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 409, "{r:?}");
    assert_eq!(r.json()["name"], "ErrUserExists");

    // GETs carry lastModified and an ETag made of it.
    let r = get(&addr, "/v2/security/users/alice", Some(&root)).await;
    assert_eq!(r.status, 200, "{r:?}");
    let u = r.json();
    assert_eq!(u["user"], "alice");
    assert_eq!(u["roles"], serde_json::json!(["rocket"]));
    let lm = u["lastModified"].as_str().unwrap();
    assert!(
        lm.len() >= 20 && lm.ends_with('Z') && lm.contains('T'),
        "{lm}"
    );
    assert_eq!(
        r.header("ETag"),
        Some(format!("\"users/alice:{lm}\"").as_str())
    );
    let r = get(&addr, "/v2/security/roles/rocket", Some(&root)).await;
    assert_eq!(r.status, 200, "{r:?}");
    let role = r.json();
    assert_eq!(role["members"], serde_json::json!(["alice"]));
    let lm = role["lastModified"].as_str().unwrap();
    assert_eq!(
        r.header("ETag"),
        Some(format!("\"roles/rocket:{lm}\"").as_str())
    );
    let r = get(&addr, "/v2/security/users", Some(&root)).await;
    assert_eq!(
        r.json()["users"],
        serde_json::json!(["alice", "bob", "root"])
    );
    assert!(r.header("ETag").is_some());
    let r = get(&addr, "/v2/security/roles", Some(&root)).await;
    let roles = r.json()["roles"].clone();
    for name in ["fleet", "guest", "rocket", "root"] {
        assert!(roles.as_array().unwrap().contains(&name.into()), "{roles}");
    }

    // Each user reads and writes its own prefix, and nothing else.
    let alice = basic("alice", "alicepw");
    let bob = basic("bob", "bobpw");
    for (who, auth, mine, theirs) in [
        ("alice", &alice, "rocket", "fleet"),
        ("bob", &bob, "fleet", "rocket"),
    ] {
        let key = format!("/v2/keys/{mine}/config");
        let r = form(&addr, "PUT", &key, &format!("value={who}"), Some(auth)).await;
        assert_eq!(r.status, 201, "{who}: {r:?}");
        let r = get(&addr, &key, Some(auth)).await;
        assert_eq!(r.status, 200, "{who}: {r:?}");
        assert_eq!(r.json()["node"]["value"], who);
        let r = get(
            &addr,
            &format!("/v2/keys/{mine}/?recursive=true"),
            Some(auth),
        )
        .await;
        assert_eq!(r.status, 200, "{who} recursive: {r:?}");
        let other = format!("/v2/keys/{theirs}/config");
        let r = form(&addr, "PUT", &other, "value=x", Some(auth)).await;
        assert_unauthorized(&r, &format!("{who} writes {theirs}"));
        let r = get(&addr, &format!("/v2/keys/{theirs}/nokey"), Some(auth)).await;
        assert_unauthorized(&r, &format!("{who} reads {theirs}"));
        let r = get(&addr, "/v2/keys/outside", Some(auth)).await;
        assert_unauthorized(&r, &format!("{who} reads outside"));
        // Not root: /v2/security is closed.
        for path in ["/v2/security/users", "/v2/security/roles/rocket"] {
            let r = get(&addr, path, Some(auth)).await;
            assert_eq!(r.status, 403, "{who} {path}: {r:?}");
            assert_eq!(r.json()["name"], "ErrForbidden");
        }
        let r = put_json(
            &addr,
            "/v2/security/users/mallory",
            r#"{"user":"mallory","password":"x"}"#,
            Some(auth),
        )
        .await;
        assert_eq!(r.status, 403, "{r:?}");
    }
    let r = get(&addr, "/v2/security/users/mallory", Some(&root)).await;
    assert_eq!(r.status, 404, "{r:?}");

    // A role update with deltas applies to /v2/keys at once: rocket gains read on /fleet/*
    // and loses write on /rocket/*.
    let r = put_json(
        &addr,
        "/v2/security/roles/rocket/update",
        r#"{"role":"rocket","grant":{"kv":{"read":["/fleet/*"]}},"revoke":{"kv":{"write":["/rocket/*"]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let role = r.json();
    assert_eq!(
        role["permissions"]["kv"]["read"],
        serde_json::json!(["/fleet/*", "/rocket/*"]),
        "etcd keeps permission lists sorted"
    );
    assert_eq!(role["permissions"]["kv"]["write"], serde_json::json!([]));
    assert!(r.header("ETag").is_some());
    let r = get(&addr, "/v2/keys/fleet/config", Some(&alice)).await;
    assert_eq!(r.status, 200, "granted read: {r:?}");
    assert_eq!(r.json()["node"]["value"], "bob");
    let r = form(
        &addr,
        "PUT",
        "/v2/keys/rocket/config",
        "value=2",
        Some(&alice),
    )
    .await;
    assert_unauthorized(&r, "revoked write");
    let r = get(&addr, "/v2/keys/rocket/config", Some(&alice)).await;
    assert_eq!(r.status, 200, "read kept: {r:?}");
    let r = form(
        &addr,
        "PUT",
        "/v2/keys/fleet/config",
        "value=3",
        Some(&alice),
    )
    .await;
    assert_unauthorized(&r, "read does not grant write");

    // Revoking a user's role over the RFC API takes effect too.
    let r = put_json(
        &addr,
        "/v2/security/users/bob/revoke",
        r#"{"user":"bob","revokeRoles":["fleet"]}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["roles"], serde_json::json!([]));
    let r = get(&addr, "/v2/keys/fleet/config", Some(&bob)).await;
    assert_unauthorized(&r, "bob without fleet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glob_patterns_as_the_rfc_defines_them() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();
    enable_with_root(&addr).await;
    let root = basic("root", "rootpw");

    for key in [
        "foo/x/bar",
        "foo/x/y/bar",
        "foo/x/baz",
        "foo/bar",
        "lit*eral",
        "litXeral",
        "exact",
        "exactly",
        "tree/a",
        "tree/b/c",
    ] {
        let r = form(
            &addr,
            "PUT",
            &format!("/v2/keys/{key}"),
            "value=v",
            Some(&root),
        )
        .await;
        assert_eq!(r.status, 201, "{key}: {r:?}");
    }
    let r = put_json(
        &addr,
        "/v2/security/roles/globber",
        r#"{"role":"globber","permissions":{"kv":{"read":["/foo/*/bar","/lit\\*eral","/exact","/tree/*"],"write":["/foo/*/bar","/lit\\*eral","/exact"]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["permissions"]["kv"]["read"][1], "/lit\\*eral");
    let r = put_json(
        &addr,
        "/v2/security/roles/writeonly",
        r#"{"role":"writeonly","permissions":{"kv":{"read":[],"write":["/wo/*"]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = put_json(
        &addr,
        "/v2/security/users/g",
        r#"{"user":"g","password":"gpw","roles":["globber","writeonly"]}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let g = basic("g", "gpw");

    // Reads: a middle star matches any (recursive) subdirectory, an escaped star only a
    // star, a pattern without a star that key only.
    for (key, ok) in [
        ("foo/x/bar", true),
        ("foo/x/y/bar", true),
        ("foo/x/baz", false),
        ("foo/bar", false),
        ("lit*eral", true),
        ("litXeral", false),
        ("exact", true),
        ("exactly", false),
        ("tree/a", true),
        ("tree/b/c", true),
        ("wo/k", false),
    ] {
        let r = get(&addr, &format!("/v2/keys/{key}"), Some(&g)).await;
        if ok {
            assert_eq!(r.status, 200, "read {key}: {r:?}");
        } else {
            assert_unauthorized(&r, &format!("read {key}"));
        }
    }
    // Writes.
    for (key, want) in [
        ("foo/x/bar", Some(200)),
        ("foo/q/bar", Some(201)),
        ("foo/q/r/s/bar", Some(201)),
        ("foo/q/baz", None),
        ("lit*eral", Some(200)),
        ("litXeral", None),
        ("exact", Some(200)),
        ("exact/child", None),
        ("exactly", None),
        ("tree/a", None),
    ] {
        let r = form(
            &addr,
            "PUT",
            &format!("/v2/keys/{key}"),
            "value=g",
            Some(&g),
        )
        .await;
        match want {
            Some(s) => assert_eq!(r.status, s, "write {key}: {r:?}"),
            None => assert_unauthorized(&r, &format!("write {key}")),
        }
    }
    // Recursive reads need a pattern that ends in a star (covering the whole subtree).
    let r = get(&addr, "/v2/keys/tree/?recursive=true", Some(&g)).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["node"]["nodes"].as_array().unwrap().len(), 2);
    for path in [
        "/v2/keys/exact?recursive=true",
        "/v2/keys/foo/x/?recursive=true",
        "/v2/keys/?recursive=true",
    ] {
        let r = get(&addr, path, Some(&g)).await;
        assert_unauthorized(&r, path);
    }
    // Write access does not imply read access.
    let r = form(&addr, "PUT", "/v2/keys/wo/k", "value=w", Some(&g)).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = get(&addr, "/v2/keys/wo/k", Some(&g)).await;
    assert_unauthorized(&r, "write-only read");
    let r = get(&addr, "/v2/keys/wo/k", Some(&root)).await;
    assert_eq!(r.json()["node"]["value"], "w");

    // An empty pattern is refused, and changes nothing.
    let before = get(&addr, "/v2/security/roles/globber", Some(&root)).await;
    for body in [
        r#"{"role":"globber","grant":{"kv":{"read":[""]}}}"#,
        r#"{"role":"globber","grant":{"kv":{"read":["/new/*"],"write":[""]}}}"#,
    ] {
        let r = put_json(
            &addr,
            "/v2/security/roles/globber/update",
            body,
            Some(&root),
        )
        .await;
        assert_eq!(r.status, 400, "{body}: {r:?}");
        assert_eq!(r.json()["name"], "ErrEmptyPattern", "{r:?}");
        assert!(
            r.json()["description"]
                .as_str()
                .unwrap()
                .contains("empty permission pattern"),
            "{r:?}"
        );
    }
    let after = get(&addr, "/v2/security/roles/globber", Some(&root)).await;
    assert_eq!(
        (after.body.as_str(), after.header("ETag")),
        (before.body.as_str(), before.header("ETag"))
    );
    let r = get(&addr, "/v2/keys/new/x", Some(&g)).await;
    assert_unauthorized(&r, "the refused grant's other pattern");
    let r = put_json(
        &addr,
        "/v2/security/roles/empty",
        r#"{"role":"empty","permissions":{"kv":{"read":[""],"write":[]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.json()["name"], "ErrEmptyPattern");
    let r = get(&addr, "/v2/security/roles/empty", Some(&root)).await;
    assert_eq!(r.status, 404, "{r:?}");
    // The user still works after the refusals.
    let r = get(&addr, "/v2/keys/exact", Some(&g)).await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// Through `/v2/security` as root: a role `rocket` reading and writing `/rocket/*`, and a user
/// `alice` (password `alicepw`) holding it.
async fn rocket_role_and_alice(addr: &str, root: &str) {
    let r = put_json(
        addr,
        "/v2/security/roles/rocket",
        r#"{"role":"rocket","permissions":{"kv":{"read":["/rocket/*"],"write":["/rocket/*"]}}}"#,
        Some(root),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = put_json(
        addr,
        "/v2/security/users/alice",
        r#"{"user":"alice","password":"alicepw","roles":["rocket"]}"#,
        Some(root),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_and_bad_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();
    let r = form(&addr, "PUT", "/v2/keys/pub/a", "value=1", None).await;
    assert_eq!(r.status, 201);
    enable_with_root(&addr).await;
    let root = basic("root", "rootpw");
    rocket_role_and_alice(&addr, &root).await;

    // Enabling made guest with read and write on everything.
    let r = get(&addr, "/v2/security/roles/guest", Some(&root)).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["permissions"]["kv"],
        serde_json::json!({"read": ["/*"], "write": ["/*"]})
    );
    let r = get(&addr, "/v2/keys/pub/a", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = form(&addr, "PUT", "/v2/keys/pub/b", "value=2", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = get(&addr, "/v2/keys/rocket/x", None).await;
    assert_eq!(
        r.status, 404,
        "guest reads anywhere (the key is missing): {r:?}"
    );

    // A user gets its own roles, not guest's.
    let r = get(&addr, "/v2/keys/pub/a", Some(&basic("alice", "alicepw"))).await;
    assert_unauthorized(&r, "alice outside her prefix");

    // Narrow guest: no more writes.
    let r = put_json(
        &addr,
        "/v2/security/roles/guest/update",
        r#"{"role":"guest","revoke":{"kv":{"write":["/*"]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["permissions"]["kv"]["write"],
        serde_json::json!([])
    );
    let r = form(&addr, "PUT", "/v2/keys/pub/c", "value=3", None).await;
    assert_unauthorized(&r, "anonymous write after the revoke");
    let r = call(&addr, "DELETE", "/v2/keys/pub/a", None, None).await;
    assert_unauthorized(&r, "anonymous delete after the revoke");
    let r = get(&addr, "/v2/keys/pub/a", None).await;
    assert_eq!(r.status, 200, "guest still reads: {r:?}");

    // Bad credentials never fall back to guest, even where guest could read.
    for bad in [
        basic("alice", "wrong"),
        basic("nobody", "x"),
        basic("root", ""),
        "Basic !!!".to_string(),
        "Bearer sometoken".to_string(),
    ] {
        let r = get(&addr, "/v2/keys/pub/a", Some(&bad)).await;
        assert_unauthorized(&r, &format!("{bad} reading"));
        let r = get(&addr, "/v2/keys/rocket/x", Some(&bad)).await;
        assert_unauthorized(&r, &format!("{bad} reading rocket"));
    }
    // The right password still works, and guest's narrowing did not touch alice.
    let r = form(
        &addr,
        "PUT",
        "/v2/keys/rocket/x",
        "value=1",
        Some(&basic("alice", "alicepw")),
    )
    .await;
    assert_eq!(r.status, 201, "{r:?}");
    // Bad credentials on /v2/security: 403, even with guest around.
    let r = get(&addr, "/v2/security/users", Some(&basic("root", "wrong"))).await;
    assert_eq!(r.status, 403, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_expiry_is_the_same_on_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let (members, _initial, _leader) = running_cluster(dir.path(), V2).await;
    let addrs: Vec<String> = members.iter().map(|m| m.endpoint()).collect();
    for a in &addrs {
        v2_ready(a).await;
    }
    let a0 = &addrs[0];
    // A v3 write through member 0 that may be retried first (it is not in the v2 history):
    // right after the election a follower's proposals can time out until its stream to the new
    // leader is up, and a v2 write retried after a timeout could be applied twice.
    crate::cluster::put_eventually(&mut members[0].client().await, "warm-up").await;
    let r = form(a0, "PUT", "/v2/keys/keep", "value=k", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let first = r.index();
    let r = form(a0, "PUT", "/v2/keys/t1", "value=a&ttl=1", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["node"]["ttl"], 1);
    let r = form(a0, "PUT", "/v2/keys/dir/t2", "value=b&ttl=2", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = form(a0, "PUT", "/v2/keys/dir/keep", "value=c", None).await;
    assert_eq!(r.status, 201, "{r:?}");

    // Both expire, on every member.
    let deadline = Instant::now() + Duration::from_secs(15);
    for a in &addrs {
        for key in ["/v2/keys/t1", "/v2/keys/dir/t2"] {
            loop {
                let r = get(a, key, None).await;
                if r.status == 404 {
                    assert_eq!(r.json()["errorCode"], 100);
                    break;
                }
                assert_eq!(r.status, 200, "{r:?}");
                assert!(Instant::now() < deadline, "{key} never expired on {a}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    // The same tree at the same index everywhere (once every member has applied as far).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (tree, index) = loop {
        let mut seen = Vec::new();
        for a in &addrs {
            let r = get(a, "/v2/keys/?recursive=true&sorted=true", None).await;
            assert_eq!(r.status, 200, "{r:?}");
            seen.push((r.body.clone(), r.index()));
        }
        if seen.iter().all(|s| *s == seen[0]) {
            break seen.swap_remove(0);
        }
        assert!(Instant::now() < deadline, "members disagree: {seen:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        tree.contains("\"/keep\"") && tree.contains("\"/dir/keep\""),
        "{tree}"
    );
    assert!(
        !tree.contains("\"/t1\"") && !tree.contains("/dir/t2"),
        "{tree}"
    );

    // History: every event from the first write on, identical on every member, with the two
    // expirations among them.
    let mut expired = Vec::new();
    let mut i = first;
    while i <= index {
        let path = format!("/v2/keys/?wait=true&recursive=true&waitIndex={i}");
        let mut bodies = Vec::new();
        for a in &addrs {
            let r = tokio::time::timeout(Duration::from_secs(5), get(a, &path, None))
                .await
                .unwrap_or_else(|_| panic!("{path} on {a} was not answered from history"));
            assert_eq!(r.status, 200, "{r:?}");
            bodies.push(r.body);
        }
        assert!(
            bodies.iter().all(|b| *b == bodies[0]),
            "waitIndex={i}: {bodies:#?}"
        );
        let ev: Value = serde_json::from_str(&bodies[0]).unwrap();
        let at = ev["node"]["modifiedIndex"].as_u64().unwrap();
        assert!(at >= i, "{ev}");
        if ev["action"] == "expire" {
            expired.push((ev["node"]["key"].as_str().unwrap().to_string(), at));
        }
        i = at + 1;
    }
    let keys: Vec<&str> = expired.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["/t1", "/dir/t2"], "{expired:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_tree_history_and_ttls() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();

    let r = form(&addr, "PUT", "/v2/keys/r/k00", "value=v0", None).await;
    assert_eq!(r.status, 201);
    let first = r.index();
    for i in 1..40 {
        let r = form(
            &addr,
            "PUT",
            &format!("/v2/keys/r/k{i:02}"),
            &format!("value=v{i}"),
            None,
        )
        .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    for i in 0..5 {
        let r = form(
            &addr,
            "PUT",
            &format!("/v2/keys/r/ttl{i}"),
            "value=t&ttl=100",
            None,
        )
        .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
    let r = form(&addr, "PUT", "/v2/keys/r/dir", "dir=true", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = form(&addr, "PUT", "/v2/keys/r/dir/inner", "value=i", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    let mut queued = Vec::new();
    for i in 0..5 {
        let r = form(
            &addr,
            "POST",
            "/v2/keys/r/queue",
            &format!("value=q{i}"),
            None,
        )
        .await;
        assert_eq!(r.status, 201, "{r:?}");
        queued.push(r.json()["node"]["key"].as_str().unwrap().to_string());
    }
    let r = call(&addr, "DELETE", "/v2/keys/r/k39", None, None).await;
    assert_eq!(r.status, 200, "{r:?}");

    let tree_path = "/v2/keys/?recursive=true&sorted=true";
    let watch_path = format!("/v2/keys/r?wait=true&recursive=true&waitIndex={first}");
    let before = get(&addr, tree_path, None).await;
    let watch_before = get(&addr, &watch_path, None).await;
    assert_eq!(watch_before.status, 200);
    assert!(watch_before.body.contains("\"/r/k00\""), "{watch_before:?}");

    srv.restart();
    let _ = srv.client().await;
    v2_ready(&addr).await;

    let after = get(&addr, tree_path, None).await;
    assert_eq!(after.status, 200);
    assert_eq!(
        without_ttl(after.json()),
        without_ttl(before.json()),
        "the tree after the restart"
    );
    assert!(after.index() >= before.index());
    // In-order keys keep their order and names.
    let r = get(&addr, "/v2/keys/r/queue?sorted=true", None).await;
    let names: Vec<String> = r.json()["node"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, queued);
    // TTLs still count down, from the same expiration.
    for i in 0..5 {
        let r = get(&addr, &format!("/v2/keys/r/ttl{i}"), None).await;
        let ttl = r.json()["node"]["ttl"].as_i64().unwrap();
        assert!((1..=100).contains(&ttl), "ttl{i}: {ttl}");
    }
    // The watch is answered from history, as before.
    let watch_after = tokio::time::timeout(Duration::from_secs(5), get(&addr, &watch_path, None))
        .await
        .expect("the watch is answered from history after the restart");
    assert_eq!(watch_after.status, 200, "{watch_after:?}");
    assert_eq!(watch_after.body, watch_before.body);
    // Writes go on from the index the member had.
    let r = form(&addr, "PUT", "/v2/keys/r/post", "value=p", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.index() > before.index());

    // Past the journal's checkpoint (every 10,000 journaled writes): many writes over
    // concurrent keep-alive connections, then a restart.
    const N: usize = 10_100;
    const CONNS: usize = 32;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await;
            for i in (c..N).step_by(CONNS) {
                let r = conn
                    .call(
                        "PUT",
                        &format!("/v2/keys/bulk/{i:05}"),
                        None,
                        Some((FORM, &format!("value={i}"))),
                    )
                    .await;
                assert_eq!(r.status, 201, "bulk {i}: {r:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    eprintln!("v2: {N} writes in {:?}", started.elapsed());
    let bulk_before = get(&addr, "/v2/keys/bulk?sorted=true", None).await;
    assert_eq!(
        bulk_before.json()["node"]["nodes"]
            .as_array()
            .unwrap()
            .len(),
        N
    );
    let before = get(&addr, tree_path, None).await;

    srv.restart();
    let _ = srv.client().await;
    v2_ready(&addr).await;
    let bulk_after = get(&addr, "/v2/keys/bulk?sorted=true", None).await;
    assert_eq!(bulk_after.body, bulk_before.body);
    let after = get(&addr, tree_path, None).await;
    assert_eq!(without_ttl(after.json()), without_ttl(before.json()));
    let watch_after = get(&addr, &watch_path, None).await;
    assert_eq!(watch_after.status, 400, "{watch_after:?}");
    assert_eq!(watch_after.json()["errorCode"], 401, "cleared from history");
    // Still writable, and the index goes on.
    let r = form(&addr, "PUT", "/v2/keys/r/last", "value=l", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.index() > before.index());
    // Once more, now from the checkpoint plus a short journal.
    let before = get(&addr, tree_path, None).await;
    srv.restart();
    let _ = srv.client().await;
    v2_ready(&addr).await;
    let after = get(&addr, tree_path, None).await;
    assert_eq!(without_ttl(after.json()), without_ttl(before.json()));
    let mut nodes = Vec::new();
    all_nodes(&after.json()["node"], &mut nodes);
    assert!(nodes.len() > N, "{}", nodes.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_auth_state_survives_restart_and_is_separate_from_v3() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();
    enable_with_root(&addr).await;
    let root = basic("root", "rootpw");
    rocket_role_and_alice(&addr, &root).await;
    let r = put_json(
        &addr,
        "/v2/security/roles/guest/update",
        r#"{"role":"guest","revoke":{"kv":{"write":["/*"]}}}"#,
        Some(&root),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let alice = basic("alice", "alicepw");

    // v2 auth does not turn v3 auth on.
    let mut c = srv.client().await;
    c.put("v3key", "no credentials", None).await.unwrap();
    assert_eq!(c.get("v3key", None).await.unwrap().kvs().len(), 1);

    // v3 auth on does not touch /v2/keys: guest and v2 users as before.
    c.user_add("root", "v3rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.auth_enable().await.unwrap();
    let e = c.put("v3key", "x", None).await.unwrap_err();
    let (code, _) = crate::code_and_message(e);
    assert_ne!(code, tonic::Code::Ok);
    let r = get(&addr, "/v2/keys/", None).await;
    assert_eq!(r.status, 200, "guest reads v2 with v3 auth on: {r:?}");
    let r = form(&addr, "PUT", "/v2/keys/anon", "value=x", None).await;
    assert_unauthorized(&r, "guest has no write");
    let r = form(&addr, "PUT", "/v2/keys/rocket/a", "value=1", Some(&alice)).await;
    assert_eq!(r.status, 201, "{r:?}");
    // v3's root password is not v2's.
    let r = get(
        &addr,
        "/v2/security/users",
        Some(&basic("root", "v3rootpw")),
    )
    .await;
    assert_eq!(r.status, 403, "{r:?}");

    let state = |addr: String, root: String| async move {
        let mut out = Vec::new();
        for path in [
            "/v2/auth/enable",
            "/v2/security/users",
            "/v2/security/users/alice",
            "/v2/security/users/root",
            "/v2/security/roles",
            "/v2/security/roles/rocket",
            "/v2/security/roles/guest",
        ] {
            let r = get(&addr, path, Some(&root)).await;
            assert_eq!(r.status, 200, "{path}: {r:?}");
            out.push((path, r.body.clone(), r.header("ETag").map(str::to_string)));
        }
        out
    };
    let before = state(addr.clone(), root.clone()).await;
    srv.restart();
    // (`Server::client` probes with an anonymous v3 read, which v3 auth now refuses.)
    v2_ready(&addr).await;
    let mut c = etcd_client::Client::connect([srv.endpoint()], None)
        .await
        .unwrap();
    let after = state(addr.clone(), root.clone()).await;
    assert_eq!(after, before);
    assert_eq!(after[0].1, "{\"enabled\":true}\n");
    let r = get(&addr, "/v2/keys/rocket/a", Some(&alice)).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = get(&addr, "/v2/keys/rocket/a", Some(&basic("alice", "wrong"))).await;
    assert_unauthorized(&r, "wrong password after restart");
    let r = form(&addr, "PUT", "/v2/keys/anon", "value=x", None).await;
    assert_unauthorized(&r, "guest still has no write after restart");
    // v3 auth is still on, and still separate.
    assert!(c.put("v3key", "x", None).await.is_err());

    // Turning v2 auth off over /v2/auth leaves v3 auth on.
    let r = call(&addr, "DELETE", "/v2/auth/enable", Some(&root), None).await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = form(&addr, "PUT", "/v2/keys/anon", "value=x", None).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(c.put("v3key", "x", None).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_watch_stream_and_history_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();

    let mut watch = Conn::open(&addr).await;
    watch
        .send(
            "GET",
            "/v2/keys/s?wait=true&stream=true&recursive=true",
            None,
            None,
            false,
        )
        .await;
    let (status, headers) = tokio::time::timeout(Duration::from_secs(5), watch.head())
        .await
        .expect("the watch's headers come at once");
    assert_eq!(status, 200, "{headers:?}");
    let start: u64 = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("X-Etcd-Index"))
        .unwrap()
        .1
        .parse()
        .unwrap();
    let mut indexes = Vec::new();
    for (i, key) in ["s/a", "s/b", "s/c/d", "other", "s/a"].iter().enumerate() {
        let r = form(
            &addr,
            "PUT",
            &format!("/v2/keys/{key}"),
            &format!("value={i}"),
            None,
        )
        .await;
        assert!(r.status == 201 || r.status == 200, "{r:?}");
        if !key.starts_with("other") {
            indexes.push((format!("/{key}"), r.index()));
        }
    }
    let r = call(&addr, "DELETE", "/v2/keys/s/b", None, None).await;
    assert_eq!(r.status, 200);
    indexes.push(("/s/b".to_string(), r.index()));

    let mut events: Vec<Value> = Vec::new();
    let mut buf = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while events.len() < indexes.len() {
        let chunk = tokio::time::timeout_at(deadline, watch.chunk())
            .await
            .unwrap_or_else(|_| panic!("the stream stalled after {events:?}"))
            .expect("the stream stays open");
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        let mut it = serde_json::Deserializer::from_str(&buf).into_iter::<Value>();
        let mut used = 0;
        while let Some(Ok(v)) = it.next() {
            used = it.byte_offset();
            events.push(v);
        }
        buf.drain(..used);
    }
    let got: Vec<(String, u64)> = events
        .iter()
        .map(|e| {
            (
                e["node"]["key"].as_str().unwrap().to_string(),
                e["node"]["modifiedIndex"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, indexes, "events in order, one connection");
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["set", "set", "set", "set", "delete"]);
    assert!(indexes[0].1 > start);
    assert_eq!(events[3]["prevNode"]["value"], "0");

    // More than the 1000 events of history: an old waitIndex is cleared.
    let mut tasks = Vec::new();
    for c in 0..8 {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&addr).await;
            for i in 0..130 {
                let r = conn
                    .call(
                        "PUT",
                        &format!("/v2/keys/h/{c}"),
                        None,
                        Some((FORM, &format!("value={i}"))),
                    )
                    .await;
                assert!(r.status == 201 || r.status == 200, "{r:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let r = get(
        &addr,
        "/v2/keys/?wait=true&waitIndex=1&recursive=true",
        None,
    )
    .await;
    // etcd answers errorCode 401 with HTTP 400 (its v2 errors map only a few codes to
    // other statuses).
    assert_eq!(r.status, 400, "{r:?}");
    let e = r.json();
    assert_eq!(e["errorCode"], 401);
    assert_eq!(
        e["message"],
        "The event in requested index is outdated and cleared"
    );
    let now = r.index();
    assert!(now > 1040, "{r:?}");
    // A waitIndex still inside the history is answered from it.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        get(
            &addr,
            &format!("/v2/keys/h?wait=true&recursive=true&waitIndex={}", now - 10),
            None,
        ),
    )
    .await
    .expect("answered from history");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.json()["node"]["modifiedIndex"].as_u64().unwrap() >= now - 10);
    // The stream saw none of those (they are outside /s), and is still open.
    let r = form(&addr, "PUT", "/v2/keys/s/z", "value=z", None).await;
    let chunk = tokio::time::timeout(Duration::from_secs(5), watch.chunk())
        .await
        .expect("the stream goes on")
        .unwrap();
    let ev: Value = serde_json::from_str(std::str::from_utf8(&chunk).unwrap().trim()).unwrap();
    assert_eq!(ev["node"]["key"], "/s/z");
    assert_eq!(ev["node"]["modifiedIndex"].as_u64(), Some(r.index()));
}

/// `/v2/members` as parsed JSON, `/v2/machines` as text.
async fn members_of(addr: &str) -> (Value, String) {
    let r = get(addr, "/v2/members", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.header("X-Etcd-Cluster-Id").is_some());
    let m = get(addr, "/v2/machines", None).await;
    assert_eq!(m.status, 200, "{m:?}");
    (r.json(), m.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_and_machines() {
    // One member.
    let dir = tempfile::tempdir().unwrap();
    let srv = start_v2(dir.path()).await;
    let addr = srv.endpoint();
    let (members, machines) = members_of(&addr).await;
    let list = members["members"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{members}");
    let id = list[0]["id"].as_str().unwrap();
    let mut c = srv.client().await;
    let v3 = c.member_list().await.unwrap();
    assert_eq!(
        u64::from_str_radix(id, 16).unwrap(),
        v3.members()[0].id(),
        "{id}"
    );
    assert_eq!(id, format!("{:x}", v3.members()[0].id()));
    assert_eq!(list[0]["name"], "default");
    assert_eq!(
        list[0]["peerURLs"],
        serde_json::json!([format!("http://127.0.0.1:{}", srv.peer_port)])
    );
    let client_url = format!("http://127.0.0.1:{}", srv.port);
    assert_eq!(list[0]["clientURLs"], serde_json::json!([client_url]));
    assert_eq!(machines, client_url);
    drop(srv);

    // Three members: the same answer through every one of them, followers included.
    let dir = tempfile::tempdir().unwrap();
    let (members, _initial, leader) = running_cluster(dir.path(), V2).await;
    for m in &members {
        v2_ready(&m.endpoint()).await;
    }
    // Each member publishes its client URLs once it has joined (as etcd's do): wait until
    // every member shows all three, the same way.
    let deadline = Instant::now() + Duration::from_secs(15);
    let answers = loop {
        let mut answers = Vec::new();
        for m in &members {
            answers.push(members_of(&m.endpoint()).await);
        }
        let published = answers.iter().all(|(json, _)| {
            json["members"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["clientURLs"].as_array().is_some_and(|u| !u.is_empty()))
        });
        if published && answers.iter().all(|a| *a == answers[0]) {
            break answers;
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed on published client URLs: {answers:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (json, machines) = &answers[0];
    let list = json["members"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{json}");
    let mut v3 = members[leader].client().await;
    let v3 = v3.member_list().await.unwrap();
    for m in &members {
        let entry = list
            .iter()
            .find(|e| e["name"] == m.name.as_str())
            .unwrap_or_else(|| panic!("{} missing from {json}", m.name));
        let id = u64::from_str_radix(entry["id"].as_str().unwrap(), 16).unwrap();
        let v3m = v3.members().iter().find(|x| x.id() == id).unwrap();
        assert_eq!(v3m.name(), m.name);
        assert_eq!(entry["peerURLs"], serde_json::json!([m.peer_url()]));
        assert_eq!(
            entry["clientURLs"],
            serde_json::json!([format!("http://{}", m.endpoint())])
        );
    }
    let mut urls: Vec<String> = members
        .iter()
        .map(|m| format!("http://{}", m.endpoint()))
        .collect();
    urls.sort();
    assert_eq!(*machines, urls.join(", "));
    // The leader, as every member names it.
    let follower = (leader + 1) % 3;
    let r = get(&members[follower].endpoint(), "/v2/members/leader", None).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["name"], members[leader].name.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_v2_over_tls() {
    let bin = std::env::var("ETCDCTL2_BIN").unwrap_or_else(|_| "/usr/bin/etcdctl".to_string());
    if !std::path::Path::new(&bin).exists() {
        eprintln!("note: {bin} not found; skipping etcdctl_v2_over_tls");
        return;
    }
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    let pki = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "v2 CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, "server");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let path = |f: &str| pki.path().join(f).display().to_string();
    std::fs::write(path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(path("server.pem"), cert.pem()).unwrap();
    std::fs::write(path("server.key"), key.serialize_pem()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server {
        child: None,
        dir: dir.path().to_path_buf(),
        port: free_port(),
        peer_port: free_port(),
        extra: vec![
            "--enable-v2".into(),
            "--cert-file".into(),
            path("server.pem"),
            "--key-file".into(),
            path("server.key"),
        ],
        env: Vec::new(),
        scheme: "https",
    };
    srv.spawn();
    let endpoint = format!("https://{}", srv.endpoint());
    let ctl = |args: &[&str]| {
        let out = Command::new(&bin)
            .env("ETCDCTL_API", "2")
            .args(["--endpoints", &endpoint, "--ca-file", &path("ca.pem")])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, _, err) = ctl(&["ls", "/"]);
        if ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "etcdctl never got through: {err}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = |args: &[&str]| {
        let (ok, out, err) = ctl(args);
        assert!(ok, "etcdctl {args:?}: {out}{err}");
        out
    };
    assert_eq!(run(&["set", "/foo", "bar"]), "bar\n");
    assert_eq!(run(&["get", "/foo"]), "bar\n");
    run(&["mkdir", "/d"]);
    assert_eq!(run(&["set", "/d/x", "1"]), "1\n");
    assert_eq!(run(&["ls", "--sort", "/"]), "/d\n/foo\n");
    assert_eq!(
        run(&["ls", "--sort", "--recursive", "/"]),
        "/d\n/d/x\n/foo\n"
    );
    assert_eq!(run(&["update", "/foo", "baz"]), "baz\n");
    let (ok, out, err) = ctl(&["mk", "/foo", "again"]);
    assert!(!ok, "mk of an existing key: {out}");
    assert!(err.contains("Key already exists"), "{err}");
    run(&["rm", "/foo"]);
    let (ok, _, err) = ctl(&["get", "/foo"]);
    assert!(!ok && err.contains("Key not found"), "{err}");
    // The member list etcdctl syncs from, over TLS too.
    let out = run(&["member", "list"]);
    assert!(out.contains("name=default"), "{out}");
    assert!(out.contains(&format!("clientURLs={endpoint}")), "{out}");
}
