//! The RFC's `/v2/security` API and its example workflow, end to end through
//! `plan` → hash → `apply` → `render`, and at the state level.

use actcd_v2auth::{
    Api, AuthOp, AuthState, Caller, HttpAnswer, MIN_BCRYPT_COST, Plan, authenticate, hash_password,
    plan,
};

struct Node {
    state: AuthState,
    now: u64,
}

/// 2015-02-05T18:00:00.000Z, the RFC's example time.
const T0: u64 = 1_423_159_200_000;

impl Node {
    fn new() -> Node {
        Node {
            state: AuthState::new(),
            now: T0,
        }
    }

    fn call_as(
        &mut self,
        api: Api,
        method: &str,
        path: &str,
        body: &str,
        caller: &Caller,
    ) -> HttpAnswer {
        match plan(&self.state, api, method, path, body.as_bytes(), caller) {
            Plan::Answer(a) => a,
            Plan::Propose {
                op,
                hash_first,
                render,
            } => {
                let op = match hash_first {
                    Some(pw) => op.with_hash(hash_password(&pw, MIN_BCRYPT_COST).unwrap()),
                    None => op,
                };
                self.now += 1000;
                render.render(self.state.apply(&op, self.now))
            }
        }
    }

    /// As a user with a password (Basic auth verified like the front would).
    fn call(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
        who: Option<(&str, &str)>,
    ) -> HttpAnswer {
        let header = who.map(|(u, p)| format!("Basic {}", b64(&format!("{u}:{p}"))));
        let caller = authenticate(&self.state, header.as_deref());
        self.call_as(Api::Security, method, path, body, &caller)
    }
}

fn b64(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for ch in s.as_bytes().chunks(3) {
        let n = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= ch.len() {
                T[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

fn body(a: &HttpAnswer) -> &str {
    std::str::from_utf8(&a.body).unwrap()
}

fn expect(a: &HttpAnswer, status: u16, want_body: &str) {
    assert_eq!((a.status, body(a)), (status, want_body));
    if !a.body.is_empty() {
        assert_eq!(a.header("Content-Type"), Some("application/json"));
    }
}

#[test]
fn rfc_example_workflow_over_http() {
    let mut n = Node::new();
    let root0 = Some(("root", "root"));
    // The RFC assumes a default root:root; etcd (and we) need it created first.
    let a = n.call(
        "PUT",
        "/users/root",
        r#"{"user":"root","password":"root"}"#,
        None,
    );
    expect(&a, 201, "");
    assert_eq!(
        a.header("ETag"),
        Some("\"users/root:2015-02-05T18:00:01.000Z\"")
    );
    // Enabling is not part of the RFC API (TBD there); it is /v2/auth/enable.
    expect(
        &n.call_as(Api::V2Auth, "PUT", "/enable", "", &Caller::Anonymous),
        200,
        "",
    );

    // Change root's password.
    let a = n.call(
        "PUT",
        "/users/root/password",
        r#"{"user":"root","password":"betterRootPW!"}"#,
        root0,
    );
    expect(
        &a,
        200,
        r#"{"user":"root","roles":["root"],"lastModified":"2015-02-05T18:00:03.000Z"}"#,
    );
    assert_eq!(
        a.header("ETag"),
        Some("\"users/root:2015-02-05T18:00:03.000Z\"")
    );
    // The old password no longer works: 403.
    expect(
        &n.call("GET", "/users", "", root0),
        403,
        r#"{"name":"ErrForbidden","description":"Forbidden: the root role is required"}"#,
    );
    let root = Some(("root", "betterRootPW!"));

    // Roles. The RFC writes "/rocket/", which under its own glob rules names only
    // the key "/rocket/"; "/rocket/*" is what covers "/rocket/RocketData".
    let a = n.call(
        "PUT",
        "/roles/rocket",
        r#"{"role":"rocket","permissions":{"kv":{"read":["/rocket/*"],"write":["/rocket/*"]}}}"#,
        root,
    );
    expect(
        &a,
        201,
        r#"{"role":"rocket","permissions":{"kv":{"read":["/rocket/*"],"write":["/rocket/*"]}},"members":[],"lastModified":"2015-02-05T18:00:04.000Z"}"#,
    );
    assert_eq!(
        a.header("ETag"),
        Some("\"roles/rocket:2015-02-05T18:00:04.000Z\"")
    );
    expect(
        &n.call("PUT", "/roles/fleet", r#"{"role":"fleet"}"#, root),
        201,
        r#"{"role":"fleet","permissions":{"kv":{"read":[],"write":[]}},"members":[],"lastModified":"2015-02-05T18:00:05.000Z"}"#,
    );
    expect(
        &n.call(
            "PUT",
            "/roles/fleet/update",
            r#"{"role":"fleet","grant":{"kv":{"read":["/fleet/*"]}}}"#,
            root,
        ),
        200,
        r#"{"role":"fleet","permissions":{"kv":{"read":["/fleet/*"],"write":[]}},"members":[],"lastModified":"2015-02-05T18:00:06.000Z"}"#,
    );

    // Users.
    let a = n.call(
        "PUT",
        "/users/rocketuser",
        r#"{"user":"rocketuser","password":"rocketpw","roles":["rocket"]}"#,
        root,
    );
    expect(&a, 201, "");
    expect(
        &n.call(
            "PUT",
            "/users/fleetuser",
            r#"{"user":"fleetuser","password":"fleetpw"}"#,
            root,
        ),
        201,
        "",
    );
    expect(
        &n.call(
            "PUT",
            "/users/fleetuser/grant",
            r#"{"user":"fleetuser","grant":["fleet"]}"#,
            root,
        ),
        200,
        r#"{"user":"fleetuser","roles":["fleet"],"lastModified":"2015-02-05T18:00:09.000Z"}"#,
    );

    // Start to use them.
    let rocket = authenticate(
        &n.state,
        Some(&format!("Basic {}", b64("rocketuser:rocketpw"))),
    );
    let fleet = authenticate(
        &n.state,
        Some(&format!("Basic {}", b64("fleetuser:fleetpw"))),
    );
    assert_eq!(rocket, Caller::User("rocketuser".into()));
    assert!(
        n.state
            .can_access(&rocket, "/rocket/RocketData", true, false)
    );
    assert!(
        n.state
            .can_access(&rocket, "/rocket/RocketData", false, false)
    );
    assert!(!n.state.can_access(&rocket, "/fleet/x", false, false));
    assert!(n.state.can_access(&fleet, "/fleet/x", false, false));
    assert!(
        !n.state.can_access(&fleet, "/fleet/x", true, false),
        "fleet may only read"
    );
    assert!(!n.state.can_access(&fleet, "/fleet", false, false));

    // Reads.
    let a = n.call("GET", "/users", "", root);
    expect(&a, 200, r#"{"users":["fleetuser","rocketuser","root"]}"#);
    let etag = a.header("ETag").unwrap().to_string();
    assert!(etag.starts_with('"') && etag.len() == 18, "{etag}");
    let head = n.call("HEAD", "/users", "", root);
    assert_eq!(
        (head.status, head.body.len(), head.header("ETag")),
        (200, 0, Some(etag.as_str()))
    );
    expect(
        &n.call("GET", "/users/rocketuser", "", root),
        200,
        r#"{"user":"rocketuser","roles":["rocket"],"lastModified":"2015-02-05T18:00:07.000Z"}"#,
    );
    expect(
        &n.call("GET", "/roles", "", root),
        200,
        r#"{"roles":["fleet","guest","rocket","root"]}"#,
    );
    expect(
        &n.call("GET", "/roles/fleet", "", root),
        200,
        r#"{"role":"fleet","permissions":{"kv":{"read":["/fleet/*"],"write":[]}},"members":["fleetuser"],"lastModified":"2015-02-05T18:00:06.000Z"}"#,
    );
    expect(
        &n.call("GET", "/roles/root", "", root),
        200,
        r#"{"role":"root","permissions":{"kv":{"read":["/*"],"write":["/*"]}},"members":["root"],"lastModified":"1970-01-01T00:00:00.000Z"}"#,
    );
}

#[test]
fn security_refusals_and_updates() {
    let mut n = Node::new();
    let root = Some(("root", "pw"));
    expect(
        &n.call(
            "PUT",
            "/users/root",
            r#"{"user":"root","password":"pw"}"#,
            None,
        ),
        201,
        "",
    );
    expect(
        &n.call("PUT", "/users/alice", r#"{"password":"a"}"#, None),
        201,
        "",
    );
    n.state.apply(&AuthOp::Enable, n.now + 1).unwrap();
    let alice = Some(("alice", "a"));
    let forbidden =
        r#"{"name":"ErrForbidden","description":"Forbidden: the root role is required"}"#;
    // Non-root, anonymous, bad credentials: 403 on every endpoint.
    for who in [alice, None, Some(("root", "wrong"))] {
        for (m, p) in [
            ("GET", "/users"),
            ("GET", "/roles/root"),
            ("PUT", "/users/bob"),
            ("DELETE", "/roles/x"),
        ] {
            expect(&n.call(m, p, "{}", who), 403, forbidden);
        }
    }
    let cases: &[(&str, &str, &str, u16, &str)] = &[
        (
            "PUT",
            "/users/alice",
            r#"{"password":"x"}"#,
            409,
            r#"{"name":"ErrUserExists","description":"auth: User alice already exists."}"#,
        ),
        (
            "PUT",
            "/users/bob",
            r#"{"user":"bob"}"#,
            400,
            r#"{"name":"ErrEmptyPassword","description":"auth: Cannot create user bob with an empty password"}"#,
        ),
        (
            "PUT",
            "/users/bob",
            r#"{"user":"bobby","password":"x"}"#,
            400,
            r#"{"name":"ErrNameMismatch","description":"User JSON name does not match the name in the URL"}"#,
        ),
        (
            "PUT",
            "/users/bob",
            r#"{"password":"x","roles":["ghost"]}"#,
            409,
            r#"{"name":"ErrRoleNotFound","description":"auth: Cannot grant role ghost: it does not exist."}"#,
        ),
        (
            "PUT",
            "/users/bob",
            "not json",
            400,
            r#"{"name":"ErrInvalidJSON","description":"Invalid JSON in request body."}"#,
        ),
        (
            "GET",
            "/users/bob",
            "",
            404,
            r#"{"name":"ErrUserNotFound","description":"auth: User bob does not exist."}"#,
        ),
        (
            "DELETE",
            "/users/bob",
            "",
            404,
            r#"{"name":"ErrUserNotFound","description":"auth: User bob does not exist"}"#,
        ),
        (
            "PUT",
            "/users/bob/grant",
            r#"{"grantRoles":["guest"]}"#,
            404,
            r#"{"name":"ErrUserNotFound","description":"auth: User bob does not exist."}"#,
        ),
        (
            "PUT",
            "/users/alice/grant",
            r#"{"grantRoles":["ghost"]}"#,
            409,
            r#"{"name":"ErrRoleNotFound","description":"auth: Cannot grant role ghost: it does not exist."}"#,
        ),
        (
            "PUT",
            "/users/alice/grant",
            r#"{"grantRoles":["guest"]}"#,
            200,
            r#"{"user":"alice","roles":["guest"],"lastModified":"2015-02-05T18:00:08.000Z"}"#,
        ),
        (
            "PUT",
            "/users/alice/grant",
            r#"{"grantRoles":["guest"]}"#,
            409,
            r#"{"name":"ErrDuplicateRoleGrant","description":"auth: Granting duplicate role guest for user alice"}"#,
        ),
        (
            "PUT",
            "/users/alice/revoke",
            r#"{"revokeRoles":["root"]}"#,
            409,
            r#"{"name":"ErrUngrantedRoleRevoke","description":"auth: Revoking ungranted role root for user alice"}"#,
        ),
        (
            "PUT",
            "/users/alice/revoke",
            r#"{"revoke":["guest"]}"#,
            200,
            r#"{"user":"alice","roles":[],"lastModified":"2015-02-05T18:00:11.000Z"}"#,
        ),
        (
            "PUT",
            "/users/root/revoke",
            r#"{"revokeRoles":["root"]}"#,
            409,
            r#"{"name":"ErrRevokeRootRole","description":"auth: cannot revoke root role from root user"}"#,
        ),
        (
            "PUT",
            "/users/alice/password",
            r#"{"user":"alice","password":""}"#,
            400,
            r#"{"name":"ErrEmptyPassword","description":"auth: Cannot set an empty password for user alice"}"#,
        ),
        (
            "DELETE",
            "/users/root",
            "",
            403,
            r#"{"name":"ErrDeleteRootUser","description":"auth: Cannot delete root user while auth is enabled."}"#,
        ),
        (
            "PUT",
            "/roles/root",
            r#"{"role":"root"}"#,
            403,
            r#"{"name":"ErrRootRoleImmutable","description":"auth: Cannot modify role root: is root role."}"#,
        ),
        (
            "PUT",
            "/roles/guest",
            r#"{"role":"guest"}"#,
            409,
            r#"{"name":"ErrRoleExists","description":"auth: Role guest already exists."}"#,
        ),
        (
            "PUT",
            "/roles/e",
            r#"{"permissions":{"kv":{"read":[""]}}}"#,
            400,
            r#"{"name":"ErrEmptyPattern","description":"auth: Cannot grant an empty permission pattern"}"#,
        ),
        (
            "PUT",
            "/roles/nope/update",
            r#"{"grant":{"kv":{"read":["/a"]}}}"#,
            404,
            r#"{"name":"ErrRoleNotFound","description":"auth: Role nope does not exist."}"#,
        ),
        (
            "PUT",
            "/roles/guest/update",
            r#"{"grant":{"kv":{"read":["/*"]}}}"#,
            409,
            r#"{"name":"ErrDuplicatePermission","description":"auth: Granting duplicate read permission /*"}"#,
        ),
        (
            "PUT",
            "/roles/guest/update",
            r#"{"revoke":{"kv":{"read":["/x"]}}}"#,
            400,
            r#"{"name":"ErrRoleNotUpdated","description":"auth: Role not updated. Use grant/revoke to update the role."}"#,
        ),
        (
            "PUT",
            "/roles/guest/update",
            r#"{"grant":{"kv":{"read":["/a\\*<"]}},"revoke":{"kv":{"write":["/*"]}}}"#,
            200,
            r#"{"role":"guest","permissions":{"kv":{"read":["/*","/a\\*\u003c"],"write":[]}},"members":[],"lastModified":"2015-02-05T18:00:20.000Z"}"#,
        ),
        (
            "GET",
            "/roles/nope",
            "",
            404,
            r#"{"name":"ErrRoleNotFound","description":"auth: Role nope does not exist."}"#,
        ),
        (
            "DELETE",
            "/roles/root",
            "",
            403,
            r#"{"name":"ErrRootRoleImmutable","description":"auth: Cannot modify role root: is root role."}"#,
        ),
        (
            "DELETE",
            "/roles/nope",
            "",
            404,
            r#"{"name":"ErrRoleNotFound","description":"auth: Role nope doesn't exist."}"#,
        ),
        ("DELETE", "/roles/guest", "", 200, ""),
        ("DELETE", "/users/alice", "", 200, ""),
        ("GET", "/users", "", 200, r#"{"users":["root"]}"#),
        (
            "POST",
            "/users",
            "",
            405,
            r#"{"name":"ErrMethodNotAllowed","description":"Method Not Allowed"}"#,
        ),
        (
            "GET",
            "/users/alice/grant",
            "",
            405,
            r#"{"name":"ErrMethodNotAllowed","description":"Method Not Allowed"}"#,
        ),
        (
            "GET",
            "/nothing",
            "",
            404,
            r#"{"name":"ErrNotFound","description":"No such resource"}"#,
        ),
        (
            "GET",
            "/users/a/b/c",
            "",
            404,
            r#"{"name":"ErrNotFound","description":"No such resource"}"#,
        ),
    ];
    for (i, (m, p, b, status, want)) in cases.iter().enumerate() {
        let a = n.call(m, p, b, root);
        assert_eq!(
            (a.status, body(&a)),
            (*status, *want),
            "case {i}: {m} {p} {b}"
        );
    }
    assert_eq!(
        n.call("POST", "/users", "", root).header("Allow"),
        Some("GET,HEAD")
    );
}

#[test]
fn security_open_while_auth_disabled_like_etcd() {
    let mut n = Node::new();
    expect(
        &n.call("GET", "/roles", "", Some(("who", "ever"))),
        200,
        r#"{"roles":["root"]}"#,
    );
    expect(&n.call("GET", "/users", "", None), 200, r#"{"users":[]}"#);
}

#[test]
fn rfc_workflow_at_state_level() {
    use actcd_v2auth::{PermDelta, Role};
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut st = AuthState::new();
    let ops = vec![
        AuthOp::CreateUser {
            name: "root".into(),
            password_hash: "h0".into(),
            roles: vec![],
            strict: true,
        },
        AuthOp::Enable,
        AuthOp::UpdateUser {
            name: "root".into(),
            password_hash: Some("h1".into()),
            grant: vec![],
            revoke: vec![],
            strict: true,
        },
        AuthOp::CreateRole {
            role: Role::new("rocket", s(&["/rocket/*"]), s(&["/rocket/*"])),
        },
        AuthOp::CreateRole {
            role: Role::new("fleet", vec![], vec![]),
        },
        AuthOp::UpdateRole {
            name: "fleet".into(),
            grant: PermDelta {
                read: s(&["/fleet/*"]),
                write: vec![],
            },
            revoke: PermDelta::default(),
        },
        AuthOp::CreateUser {
            name: "rocketuser".into(),
            password_hash: "h2".into(),
            roles: s(&["rocket"]),
            strict: true,
        },
        AuthOp::CreateUser {
            name: "fleetuser".into(),
            password_hash: "h3".into(),
            roles: vec![],
            strict: true,
        },
        AuthOp::UpdateUser {
            name: "fleetuser".into(),
            password_hash: None,
            grant: s(&["fleet"]),
            revoke: vec![],
            strict: true,
        },
    ];
    for (i, op) in ops.iter().enumerate() {
        st.apply(op, T0 + i as u64)
            .unwrap_or_else(|e| panic!("{i}: {e}"));
    }
    let rocket = Caller::User("rocketuser".into());
    let fleet = Caller::User("fleetuser".into());
    assert!(st.can_access(&rocket, "/rocket/RocketData", true, false));
    assert!(!st.can_access(&rocket, "/fleet/a", false, false));
    assert!(st.can_access(&fleet, "/fleet/a", false, false));
    assert!(!st.can_access(&fleet, "/fleet/a", true, false));
    assert!(st.can_access(&fleet, "/fleet/", false, true));
    // Reads and writes outside the granted patterns fail; the guest role
    // (created by Enable with /* read and write) still serves anonymous callers.
    assert!(st.can_access(&Caller::Anonymous, "/anything", true, false));
    assert!(!st.can_access(&Caller::BadCredentials, "/anything", false, false));
    assert_eq!(st.users["root"].password_hash, "h1");
    assert_eq!(AuthState::recover(&st.save()), Ok(st));
}
