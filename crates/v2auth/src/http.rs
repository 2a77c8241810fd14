//! HTTP planning for `/v2/auth` (etcd 3.4's handlers, byte for byte) and the
//! RFC's `/v2/security`. `plan` either answers at once (reads, refusals) or
//! returns the op to propose plus a [`Render`] that turns the apply result into
//! the reply. No I/O here; the front does hashing, proposing and writing.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::access::Caller;
use crate::error::AuthError;
use crate::json;
use crate::model::{AuthState, Role, User, rfc3339_ms};
use crate::ops::{Answer, AuthOp, PermDelta};

/// Which API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// etcd 3.4's `/v2/auth/...`.
    V2Auth,
    /// The RFC's `/v2/security/...`.
    Security,
}

/// A complete reply. `headers` holds what etcd's handler sets itself
/// (`Content-Type`, `Allow`, `ETag`, ...); the front adds `Date`,
/// `Content-Length`, its CORS headers, and `X-Etcd-Cluster-Id` when
/// `cluster_id` is true (etcd sets that header only once a request has passed
/// the method and root checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub cluster_id: bool,
}

impl HttpAnswer {
    fn json(status: u16, body: String, cluster_id: bool) -> HttpAnswer {
        HttpAnswer {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.into_bytes(),
            cluster_id,
        }
    }

    fn with_header(mut self, k: &str, v: String) -> HttpAnswer {
        self.headers.push((k.to_string(), v));
        self
    }

    /// The value of header `name` (case-insensitive), if set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the front should do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Reply with this now.
    Answer(HttpAnswer),
    /// If `hash_first` is `Some(pw)`, run `hash_password(pw, cost)` and
    /// `op.with_hash(hash)` (a hashing error: answer `render.render(Err(e))`);
    /// then propose `op`, and once applied reply with `render.render(result)`.
    Propose {
        op: AuthOp,
        hash_first: Option<String>,
        render: Render,
    },
}

/// How to turn an apply result into the reply (plain data, cheap to keep
/// across the proposal, and carried with it: the member that applies the op
/// renders the answer).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub enum Render {
    /// `/v2/auth`: 200 with an empty JSON-typed body (enable, disable, deletes).
    V2Empty,
    /// `/v2/auth/users/NAME` PUT: `{"user":..,"roles":..}`. `null_roles`: the
    /// request had no `roles`, so a create echoes `null` (Go's nil slice).
    /// `status_created`: 201 when the op created the user (etcd's create-or-update
    /// path; its create-with-roles path answers 200 either way).
    V2User {
        null_roles: bool,
        status_created: bool,
    },
    /// `/v2/auth/roles/NAME` PUT: a create echoes the request as etcd decoded it
    /// (`echo`, 201); an update prints the new role (200).
    V2Role { echo: Option<Vec<u8>> },
    /// `/v2/security`: 200, empty body.
    SecEmpty,
    /// `/v2/security` user reply: 201 and no body on create, else 200 and the
    /// user JSON; both with `ETag: "users/NAME:<lastModified>"`.
    SecUser { created: bool },
    /// `/v2/security` role reply (201 on create, else 200), role JSON and ETag.
    SecRole,
}

/// What an auth change proposes through the log: the op, and how the member that applies it
/// renders the answer for the waiting client.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Proposal {
    pub op: AuthOp,
    pub render: Render,
}

impl Proposal {
    /// JSON bytes to replicate (a `V2Request`'s `auth_op`).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Proposal, AuthError> {
        serde_json::from_slice(bytes).map_err(|e| AuthError::Decode(format!("proposal: {e}")))
    }
}

impl Render {
    /// The reply for the result of applying the planned op.
    pub fn render(&self, result: Result<Answer, AuthError>) -> HttpAnswer {
        match (self, result) {
            (Render::V2Empty | Render::V2User { .. } | Render::V2Role { .. }, Err(e)) => {
                v2_error(&e)
            }
            (Render::SecEmpty | Render::SecUser { .. } | Render::SecRole, Err(e)) => sec_error(&e),
            (Render::V2Empty, Ok(_)) => HttpAnswer::json(200, String::new(), true),
            (
                Render::V2User {
                    null_roles,
                    status_created,
                },
                Ok(Answer::User {
                    user,
                    created,
                    shown_roles,
                }),
            ) => {
                let mut b = String::from("{\"user\":");
                json::str(&mut b, &user.name);
                b.push_str(",\"roles\":");
                let null = created && *null_roles && shown_roles.is_empty();
                json::list(&mut b, (!null).then_some(&shown_roles[..]));
                b.push_str("}\n");
                HttpAnswer::json(if created && *status_created { 201 } else { 200 }, b, true)
            }
            (Render::V2Role { echo }, Ok(Answer::Role { role, created, .. })) => {
                match (created, echo) {
                    (true, Some(echo)) => HttpAnswer {
                        status: 201,
                        headers: vec![("Content-Type".into(), "application/json".into())],
                        body: echo.clone(),
                        cluster_id: true,
                    },
                    _ => {
                        let mut b = v2_role_json(&role);
                        b.push('\n');
                        HttpAnswer::json(if created { 201 } else { 200 }, b, true)
                    }
                }
            }
            (Render::SecEmpty, Ok(_)) => HttpAnswer::json(200, String::new(), false),
            (Render::SecUser { created }, Ok(Answer::User { user, .. })) => {
                let etag = user_etag(&user);
                if *created {
                    HttpAnswer::json(201, String::new(), false).with_header("ETag", etag)
                } else {
                    HttpAnswer::json(200, sec_user_json(&user), false).with_header("ETag", etag)
                }
            }
            (
                Render::SecRole,
                Ok(Answer::Role {
                    role,
                    created,
                    members,
                }),
            ) => HttpAnswer::json(
                if created { 201 } else { 200 },
                sec_role_json(&role, &members),
                false,
            )
            .with_header("ETag", role_etag(&role)),
            // An answer of the wrong kind cannot come from the op `plan` chose.
            (_, Ok(_)) => HttpAnswer::json(200, String::new(), true),
        }
    }
}

/// etcd's body for a refused `/v2/keys` request (errorCode 110), newline included.
pub fn unauthorized_json() -> Vec<u8> {
    b"{\"errorCode\":110,\"message\":\"The request requires user authentication\",\"cause\":\"Insufficient credentials\",\"index\":0}\n".to_vec()
}

/// etcd's whole 401 for `/v2/keys` (checked with curl against 3.4.23): JSON body
/// from [`unauthorized_json`], `X-Etcd-Index: 0`. etcd sends no `WWW-Authenticate`.
pub fn unauthorized_answer() -> HttpAnswer {
    HttpAnswer {
        status: 401,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("X-Etcd-Index".into(), "0".into()),
        ],
        body: unauthorized_json(),
        cluster_id: true,
    }
}

/// Plan a request on `/v2/auth` or `/v2/security`. `sub_path` is the URL path
/// after the API prefix (e.g. `/users/alice`), already percent-decoded.
pub fn plan(
    state: &AuthState,
    api: Api,
    method: &str,
    sub_path: &str,
    body: &[u8],
    caller: &Caller,
) -> Plan {
    match api {
        Api::V2Auth => plan_v2(state, method, sub_path, body, caller),
        Api::Security => plan_sec(state, method, sub_path, body, caller),
    }
}

// ---------------------------------------------------------------- /v2/auth

fn v2_error(e: &AuthError) -> HttpAnswer {
    v2_message(e.status(), &e.to_string(), true)
}

fn v2_message(status: u16, msg: &str, cluster_id: bool) -> HttpAnswer {
    let mut b = String::from("{\"message\":");
    json::str(&mut b, msg);
    b.push('}');
    HttpAnswer::json(status, b, cluster_id)
}

fn method_not_allowed(allow: &str) -> HttpAnswer {
    HttpAnswer {
        status: 405,
        headers: vec![
            ("Allow".into(), allow.into()),
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ],
        body: b"Method Not Allowed\n".to_vec(),
        cluster_id: false,
    }
}

fn not_found() -> HttpAnswer {
    HttpAnswer {
        status: 404,
        headers: vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("X-Content-Type-Options".into(), "nosniff".into()),
        ],
        body: b"404 page not found\n".to_vec(),
        cluster_id: false,
    }
}

fn no_auth() -> HttpAnswer {
    v2_message(401, "Insufficient credentials", false)
}

/// Go's `path.Clean` for rooted paths.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = vec![];
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go-like decoding of the first JSON value in `body`: `null` is the zero
/// value, unknown fields are ignored, trailing bytes after the value are ignored.
fn decode<T: DeserializeOwned + Default>(body: &[u8]) -> Option<T> {
    let v: serde_json::Value = serde_json::Deserializer::from_slice(body)
        .into_iter()
        .next()?
        .ok()?;
    if v.is_null() {
        return Some(T::default());
    }
    serde_json::from_value(v).ok()
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct UserIn {
    user: Option<String>,
    password: Option<String>,
    roles: Option<Vec<String>>,
    grant: Option<Vec<String>>,
    revoke: Option<Vec<String>>,
    #[serde(rename = "grantRoles")]
    grant_roles: Option<Vec<String>>,
    #[serde(rename = "revokeRoles")]
    revoke_roles: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct KvIn {
    read: Option<Vec<String>>,
    write: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PermsIn {
    kv: Option<KvIn>,
}

impl PermsIn {
    fn kv(&self) -> (Option<&Vec<String>>, Option<&Vec<String>>) {
        match &self.kv {
            Some(kv) => (kv.read.as_ref(), kv.write.as_ref()),
            None => (None, None),
        }
    }
    /// etcd's `Permissions.IsEmpty` (for a present value).
    fn is_empty(&self) -> bool {
        let (r, w) = self.kv();
        r.is_none_or(|v| v.is_empty()) && w.is_none_or(|v| v.is_empty())
    }
    fn delta(&self) -> PermDelta {
        let (r, w) = self.kv();
        PermDelta {
            read: r.cloned().unwrap_or_default(),
            write: w.cloned().unwrap_or_default(),
        }
    }
    /// Go's encoding of a `Permissions` value.
    fn go_json(&self, out: &mut String) {
        let (r, w) = self.kv();
        out.push_str("{\"kv\":{\"read\":");
        json::list(out, r.map(|v| &v[..]));
        out.push_str(",\"write\":");
        json::list(out, w.map(|v| &v[..]));
        out.push_str("}}");
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RoleIn {
    role: Option<String>,
    permissions: Option<PermsIn>,
    grant: Option<PermsIn>,
    revoke: Option<PermsIn>,
}

impl RoleIn {
    fn to_role(&self, name: &str) -> Role {
        let (r, w) = self
            .permissions
            .as_ref()
            .map(|p| p.kv())
            .unwrap_or((None, None));
        Role {
            name: name.to_string(),
            read: r.cloned().unwrap_or_default(),
            write: w.cloned().unwrap_or_default(),
            last_modified: 0,
            read_unset: r.is_none(),
            write_unset: w.is_none(),
        }
    }
}

/// etcd's JSON for a stored role (no trailing newline).
fn v2_role_json(role: &Role) -> String {
    let mut b = String::from("{\"role\":");
    json::str(&mut b, &role.name);
    b.push_str(",\"permissions\":{\"kv\":{\"read\":");
    json::list(&mut b, (!role.read_unset).then_some(&role.read[..]));
    b.push_str(",\"write\":");
    json::list(&mut b, (!role.write_unset).then_some(&role.write[..]));
    b.push_str("}}}");
    b
}

/// `{"user":..,"roles":[role objects]}`; `Err` names the first missing role
/// when `strict` (single GET), else missing roles are skipped (the list).
fn v2_user_with_roles(state: &AuthState, user: &User, strict: bool) -> Result<String, AuthError> {
    let mut roles = vec![];
    for rn in &user.roles {
        match state.role(rn) {
            Some(r) => roles.push(v2_role_json(&r)),
            None if strict => return Err(AuthError::RoleNotFound(rn.clone())),
            None => {}
        }
    }
    let mut b = String::from("{\"user\":");
    json::str(&mut b, &user.name);
    if !roles.is_empty() {
        b.push_str(",\"roles\":[");
        b.push_str(&roles.join(","));
        b.push(']');
    }
    b.push('}');
    Ok(b)
}

fn plan_v2(state: &AuthState, method: &str, sub: &str, body: &[u8], caller: &Caller) -> Plan {
    let answer = |a| Plan::Answer(a);
    match sub {
        "/enable" => {
            if !matches!(method, "GET" | "PUT" | "DELETE") {
                return answer(method_not_allowed("GET,PUT,DELETE"));
            }
            if method != "GET" && !state.is_root_caller(caller) {
                return answer(no_auth());
            }
            match method {
                "GET" => answer(HttpAnswer::json(
                    200,
                    format!("{{\"enabled\":{}}}\n", state.enabled),
                    true,
                )),
                "PUT" => propose(AuthOp::Enable, None, Render::V2Empty),
                _ => propose(AuthOp::Disable, None, Render::V2Empty),
            }
        }
        "/users" => v2_base_users(state, method, caller),
        "/roles" => v2_base_roles(state, method, caller),
        s if s.starts_with("/users/") || s.starts_with("/roles/") => {
            let cleaned = clean_path(s);
            let pieces: Vec<&str> = cleaned.split('/').collect();
            let users = s.starts_with("/users/");
            match (pieces.len(), users) {
                (2, true) => v2_base_users(state, method, caller),
                (2, false) => v2_base_roles(state, method, caller),
                (3, true) => v2_for_user(state, method, pieces[2], body, caller),
                (3, false) => v2_for_role(state, method, pieces[2], body, caller),
                _ => answer(v2_message(400, "Invalid path", false)),
            }
        }
        _ => answer(not_found()),
    }
}

fn propose(op: AuthOp, hash_first: Option<String>, render: Render) -> Plan {
    Plan::Propose {
        op,
        hash_first,
        render,
    }
}

fn v2_base_users(state: &AuthState, method: &str, caller: &Caller) -> Plan {
    if method != "GET" {
        return Plan::Answer(method_not_allowed("GET"));
    }
    if !state.is_root_caller(caller) {
        return Plan::Answer(no_auth());
    }
    let mut b = String::from("{\"users\":");
    if state.users.is_empty() {
        b.push_str("null");
    } else {
        let users: Vec<String> = state
            .users
            .values()
            .filter_map(|u| v2_user_with_roles(state, u, false).ok())
            .collect();
        b.push('[');
        b.push_str(&users.join(","));
        b.push(']');
    }
    b.push_str("}\n");
    Plan::Answer(HttpAnswer::json(200, b, true))
}

fn v2_base_roles(state: &AuthState, method: &str, caller: &Caller) -> Plan {
    if method != "GET" {
        return Plan::Answer(method_not_allowed("GET"));
    }
    if !state.is_root_caller(caller) {
        return Plan::Answer(no_auth());
    }
    let roles: Vec<String> = state
        .role_names()
        .iter()
        .filter_map(|n| state.role(n))
        .map(|r| v2_role_json(&r))
        .collect();
    Plan::Answer(HttpAnswer::json(
        200,
        format!("{{\"roles\":[{}]}}\n", roles.join(",")),
        true,
    ))
}

fn v2_for_user(state: &AuthState, method: &str, name: &str, body: &[u8], caller: &Caller) -> Plan {
    if !matches!(method, "GET" | "PUT" | "DELETE") {
        return Plan::Answer(method_not_allowed("GET,PUT,DELETE"));
    }
    if !state.is_root_caller(caller) {
        return Plan::Answer(no_auth());
    }
    match method {
        "GET" => {
            let Some(user) = state.users.get(name) else {
                return Plan::Answer(v2_error(&AuthError::UserNotFound(name.into())));
            };
            match v2_user_with_roles(state, user, true) {
                Ok(mut b) => {
                    b.push('\n');
                    Plan::Answer(HttpAnswer::json(200, b, true))
                }
                Err(e) => Plan::Answer(v2_error(&e)),
            }
        }
        "DELETE" => propose(
            AuthOp::DeleteUser { name: name.into() },
            None,
            Render::V2Empty,
        ),
        _ => {
            let Some(u) = decode::<UserIn>(body) else {
                return Plan::Answer(v2_message(400, "Invalid JSON in request body.", true));
            };
            if u.user.as_deref().unwrap_or("") != name {
                return Plan::Answer(v2_message(
                    400,
                    "User JSON name does not match the name in the URL",
                    true,
                ));
            }
            let password = u.password.clone().unwrap_or_default();
            let pw = (!password.is_empty()).then_some(password);
            let grant = u.grant.clone().unwrap_or_default();
            let revoke = u.revoke.clone().unwrap_or_default();
            let roles = u.roles.clone().unwrap_or_default();
            if grant.is_empty() && revoke.is_empty() {
                if !roles.is_empty() {
                    if pw.is_none() {
                        return Plan::Answer(v2_error(&AuthError::EmptyPassword(name.into())));
                    }
                    let op = AuthOp::CreateUser {
                        name: name.into(),
                        password_hash: String::new(),
                        roles,
                        strict: false,
                    };
                    propose(
                        op,
                        pw,
                        Render::V2User {
                            null_roles: false,
                            status_created: false,
                        },
                    )
                } else {
                    let op = AuthOp::CreateOrUpdateUser {
                        name: name.into(),
                        password_hash: None,
                        roles_null: u.roles.is_none(),
                    };
                    let render = Render::V2User {
                        null_roles: u.roles.is_none(),
                        status_created: true,
                    };
                    propose(op, pw, render)
                }
            } else {
                if !roles.is_empty() {
                    return Plan::Answer(v2_message(
                        400,
                        "User JSON contains both roles and grant/revoke",
                        true,
                    ));
                }
                let op = AuthOp::UpdateUser {
                    name: name.into(),
                    password_hash: None,
                    grant,
                    revoke,
                    strict: false,
                };
                propose(
                    op,
                    pw,
                    Render::V2User {
                        null_roles: false,
                        status_created: false,
                    },
                )
            }
        }
    }
}

fn v2_for_role(state: &AuthState, method: &str, name: &str, body: &[u8], caller: &Caller) -> Plan {
    if !matches!(method, "GET" | "PUT" | "DELETE") {
        return Plan::Answer(method_not_allowed("GET,PUT,DELETE"));
    }
    if !state.is_root_caller(caller) {
        return Plan::Answer(no_auth());
    }
    match method {
        "GET" => match state.role(name) {
            Some(r) => Plan::Answer(HttpAnswer::json(200, v2_role_json(&r) + "\n", true)),
            None => Plan::Answer(v2_error(&AuthError::RoleNotFound(name.into()))),
        },
        "DELETE" => propose(
            AuthOp::DeleteRole { name: name.into() },
            None,
            Render::V2Empty,
        ),
        _ => {
            let Some(r) = decode::<RoleIn>(body) else {
                return Plan::Answer(v2_message(400, "Invalid JSON in request body.", true));
            };
            if r.role.as_deref().unwrap_or("") != name {
                return Plan::Answer(v2_message(
                    400,
                    "Role JSON name does not match the name in the URL",
                    true,
                ));
            }
            let empty = |p: &Option<PermsIn>| p.as_ref().is_none_or(|p| p.is_empty());
            if empty(&r.grant) && empty(&r.revoke) {
                // Echo what etcd echoes: the decoded request, stray grant/revoke included.
                let mut echo = String::from("{\"role\":");
                json::str(&mut echo, name);
                echo.push_str(",\"permissions\":");
                match &r.permissions {
                    Some(p) => p.go_json(&mut echo),
                    None => echo.push_str("{\"kv\":{\"read\":null,\"write\":null}}"),
                }
                for (key, p) in [("grant", &r.grant), ("revoke", &r.revoke)] {
                    if let Some(p) = p {
                        echo.push_str(&format!(",\"{key}\":"));
                        p.go_json(&mut echo);
                    }
                }
                echo.push_str("}\n");
                let op = AuthOp::CreateRole {
                    role: r.to_role(name),
                };
                propose(
                    op,
                    None,
                    Render::V2Role {
                        echo: Some(echo.into_bytes()),
                    },
                )
            } else {
                if !empty(&r.permissions) {
                    return Plan::Answer(v2_message(
                        400,
                        "Role JSON contains both permissions and grant/revoke",
                        true,
                    ));
                }
                let delta =
                    |p: &Option<PermsIn>| p.as_ref().map(PermsIn::delta).unwrap_or_default();
                let op = AuthOp::UpdateRole {
                    name: name.into(),
                    grant: delta(&r.grant),
                    revoke: delta(&r.revoke),
                };
                propose(op, None, Render::V2Role { echo: None })
            }
        }
    }
}

// ---------------------------------------------------------------- /v2/security

fn sec_message(status: u16, name: &str, description: &str) -> HttpAnswer {
    let mut b = String::from("{\"name\":");
    json::str(&mut b, name);
    b.push_str(",\"description\":");
    json::str(&mut b, description);
    b.push('}');
    HttpAnswer::json(status, b, false)
}

fn sec_error(e: &AuthError) -> HttpAnswer {
    sec_message(e.status(), e.name(), &e.to_string())
}

fn sec_method_not_allowed(allow: &str) -> HttpAnswer {
    sec_message(405, "ErrMethodNotAllowed", "Method Not Allowed").with_header("Allow", allow.into())
}

fn user_etag(u: &User) -> String {
    format!("\"users/{}:{}\"", u.name, rfc3339_ms(u.last_modified))
}

fn role_etag(r: &Role) -> String {
    format!("\"roles/{}:{}\"", r.name, rfc3339_ms(r.last_modified))
}

/// FNV-1a 64 over the names, each followed by a newline.
fn list_etag(names: &[String]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for n in names {
        for b in n.bytes().chain(std::iter::once(b'\n')) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("\"{h:016x}\"")
}

fn sec_user_json(u: &User) -> String {
    let roles: Vec<String> = u.roles.iter().cloned().collect();
    let mut b = String::from("{\"user\":");
    json::str(&mut b, &u.name);
    b.push_str(",\"roles\":");
    json::list(&mut b, Some(&roles));
    b.push_str(",\"lastModified\":");
    json::str(&mut b, &rfc3339_ms(u.last_modified));
    b.push('}');
    b
}

fn sec_role_json(r: &Role, members: &[String]) -> String {
    let mut b = String::from("{\"role\":");
    json::str(&mut b, &r.name);
    b.push_str(",\"permissions\":{\"kv\":{\"read\":");
    json::list(&mut b, Some(&r.read));
    b.push_str(",\"write\":");
    json::list(&mut b, Some(&r.write));
    b.push_str("}},\"members\":");
    json::list(&mut b, Some(members));
    b.push_str(",\"lastModified\":");
    json::str(&mut b, &rfc3339_ms(r.last_modified));
    b.push('}');
    b
}

fn head_strip(method: &str, mut a: HttpAnswer) -> HttpAnswer {
    if method == "HEAD" {
        a.body.clear();
    }
    a
}

fn plan_sec(state: &AuthState, method: &str, sub: &str, body: &[u8], caller: &Caller) -> Plan {
    let cleaned = clean_path(sub);
    let pieces: Vec<&str> = cleaned.split('/').skip(1).collect();
    let allow = match pieces.as_slice() {
        ["users"] | ["roles"] => "GET,HEAD",
        ["users" | "roles", _] => "GET,HEAD,PUT,DELETE",
        ["users", _, "grant" | "revoke" | "password"] | ["roles", _, "update"] => "PUT",
        _ => return Plan::Answer(sec_message(404, "ErrNotFound", "No such resource")),
    };
    if !allow.split(',').any(|m| m == method) {
        return Plan::Answer(sec_method_not_allowed(allow));
    }
    if !state.is_root_caller(caller) {
        return Plan::Answer(sec_message(
            403,
            "ErrForbidden",
            "Forbidden: the root role is required",
        ));
    }
    let bad_json = || {
        Plan::Answer(sec_message(
            400,
            "ErrInvalidJSON",
            "Invalid JSON in request body.",
        ))
    };
    let mismatch = |what: &str| {
        Plan::Answer(sec_message(
            400,
            "ErrNameMismatch",
            &format!("{what} JSON name does not match the name in the URL"),
        ))
    };
    match (pieces.as_slice(), method) {
        (["users"], _) => {
            let names: Vec<String> = state.users.keys().cloned().collect();
            let mut b = String::from("{\"users\":");
            json::list(&mut b, Some(&names));
            b.push('}');
            let a = HttpAnswer::json(200, b, false).with_header("ETag", list_etag(&names));
            Plan::Answer(head_strip(method, a))
        }
        (["roles"], _) => {
            let names = state.role_names();
            let mut b = String::from("{\"roles\":");
            json::list(&mut b, Some(&names));
            b.push('}');
            let a = HttpAnswer::json(200, b, false).with_header("ETag", list_etag(&names));
            Plan::Answer(head_strip(method, a))
        }
        (["users", name], "GET" | "HEAD") => match state.users.get(*name) {
            Some(u) => {
                let a = HttpAnswer::json(200, sec_user_json(u), false)
                    .with_header("ETag", user_etag(u));
                Plan::Answer(head_strip(method, a))
            }
            None => Plan::Answer(head_strip(
                method,
                sec_error(&AuthError::UserNotFound(name.to_string())),
            )),
        },
        (["roles", name], "GET" | "HEAD") => match state.role(name) {
            Some(r) => {
                let a = HttpAnswer::json(200, sec_role_json(&r, &state.members(name)), false)
                    .with_header("ETag", role_etag(&r));
                Plan::Answer(head_strip(method, a))
            }
            None => Plan::Answer(head_strip(
                method,
                sec_error(&AuthError::RoleNotFound(name.to_string())),
            )),
        },
        (["users", name], "DELETE") => propose(
            AuthOp::DeleteUser {
                name: name.to_string(),
            },
            None,
            Render::SecEmpty,
        ),
        (["roles", name], "DELETE") => propose(
            AuthOp::DeleteRole {
                name: name.to_string(),
            },
            None,
            Render::SecEmpty,
        ),
        (["users", name], _) => {
            let Some(u) = decode::<UserIn>(body) else {
                return bad_json();
            };
            if u.user.as_deref().is_some_and(|n| n != *name) {
                return mismatch("User");
            }
            let pw = u.password.unwrap_or_default();
            if pw.is_empty() {
                return Plan::Answer(sec_error(&AuthError::EmptyPassword(name.to_string())));
            }
            let op = AuthOp::CreateUser {
                name: name.to_string(),
                password_hash: String::new(),
                roles: u.roles.unwrap_or_default(),
                strict: true,
            };
            propose(op, Some(pw), Render::SecUser { created: true })
        }
        (["users", name, action], _) => {
            let Some(u) = decode::<UserIn>(body) else {
                return bad_json();
            };
            if u.user.as_deref().is_some_and(|n| n != *name) {
                return mismatch("User");
            }
            let (mut grant, mut revoke, mut pw) = (vec![], vec![], None);
            match *action {
                "grant" => grant = u.grant_roles.or(u.grant).unwrap_or_default(),
                "revoke" => revoke = u.revoke_roles.or(u.revoke).unwrap_or_default(),
                _ => {
                    let p = u.password.unwrap_or_default();
                    if p.is_empty() {
                        return Plan::Answer(sec_error(&AuthError::EmptyNewPassword(
                            name.to_string(),
                        )));
                    }
                    pw = Some(p);
                }
            }
            let op = AuthOp::UpdateUser {
                name: name.to_string(),
                password_hash: None,
                grant,
                revoke,
                strict: true,
            };
            propose(op, pw, Render::SecUser { created: false })
        }
        (["roles", name], _) => {
            let Some(r) = decode::<RoleIn>(body) else {
                return bad_json();
            };
            if r.role.as_deref().is_some_and(|n| n != *name) {
                return mismatch("Role");
            }
            propose(
                AuthOp::CreateRole {
                    role: r.to_role(name),
                },
                None,
                Render::SecRole,
            )
        }
        (["roles", name, _], _) => {
            let Some(r) = decode::<RoleIn>(body) else {
                return bad_json();
            };
            if r.role.as_deref().is_some_and(|n| n != *name) {
                return mismatch("Role");
            }
            let delta = |p: &Option<PermsIn>| p.as_ref().map(PermsIn::delta).unwrap_or_default();
            let op = AuthOp::UpdateRole {
                name: name.to_string(),
                grant: delta(&r.grant),
                revoke: delta(&r.revoke),
            };
            propose(op, None, Render::SecRole)
        }
        _ => Plan::Answer(sec_message(404, "ErrNotFound", "No such resource")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(p: Plan) -> HttpAnswer {
        match p {
            Plan::Answer(a) => a,
            Plan::Propose { .. } => panic!("expected an immediate answer"),
        }
    }

    #[test]
    fn path_cleaning_like_go() {
        for (p, want) in [
            ("/users/", "/users"),
            ("/users//a/", "/users/a"),
            ("/users/./a", "/users/a"),
            ("/users/a/..", "/users"),
            ("/../..", "/"),
        ] {
            assert_eq!(clean_path(p), want);
        }
    }

    #[test]
    fn v2_routing_edges() {
        let st = AuthState::new();
        let c = Caller::Anonymous;
        let get = |p: &str| answer(plan(&st, Api::V2Auth, "GET", p, b"", &c));
        assert_eq!(get("/users/").body, b"{\"users\":null}\n");
        assert_eq!(get("/users/a/..").body, b"{\"users\":null}\n");
        assert_eq!(get("/roles//").status, 200);
        assert_eq!(
            (get("/users/a/b").status, get("/users/a/b").cluster_id),
            (400, false)
        );
        assert_eq!(get("/nope").body, b"404 page not found\n");
        assert_eq!(get("").status, 404);
        let head = answer(plan(&st, Api::V2Auth, "HEAD", "/users", b"", &c));
        assert_eq!((head.status, head.header("Allow")), (405, Some("GET")));
    }

    #[test]
    fn render_hash_failure_and_plans() {
        let st = AuthState::new();
        let p = plan(
            &st,
            Api::V2Auth,
            "PUT",
            "/users/u",
            br#"{"user":"u","password":"pw"}"#,
            &Caller::Anonymous,
        );
        let Plan::Propose {
            op,
            hash_first,
            render,
        } = p
        else {
            panic!("expected a proposal")
        };
        assert_eq!(hash_first.as_deref(), Some("pw"));
        assert_eq!(
            op,
            AuthOp::CreateOrUpdateUser {
                name: "u".into(),
                password_hash: None,
                roles_null: true
            }
        );
        let a = render.render(Err(AuthError::Hash("cost".into())));
        assert_eq!(
            (a.status, a.body.as_slice()),
            (
                500,
                &b"{\"message\":\"auth: password hashing failed: cost\"}"[..]
            )
        );
        // A user update without a password hashes nothing.
        let p = plan(
            &st,
            Api::V2Auth,
            "PUT",
            "/users/u",
            br#"{"user":"u","grant":["r"]}"#,
            &Caller::Anonymous,
        );
        assert!(matches!(
            p,
            Plan::Propose {
                hash_first: None,
                op: AuthOp::UpdateUser { .. },
                ..
            }
        ));
    }

    /// Whatever the method, path, body and caller, `plan` answers without panicking.
    #[test]
    fn plan_never_panics() {
        let mut st = AuthState::new();
        let user = |n: &str, roles: &[&str]| User {
            name: n.into(),
            password_hash: "h".into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            last_modified: 0,
            roles_uncanonical: false,
        };
        st.users.insert("root".into(), user("root", &["root"]));
        st.users.insert("u".into(), user("u", &["ghost"]));
        let methods = ["GET", "HEAD", "PUT", "POST", "DELETE", "", "get"];
        let paths = [
            "",
            "/",
            "/enable",
            "/enable/",
            "/users",
            "/users/",
            "/users/u",
            "/users/u/grant",
            "/users/u/password",
            "/users/root/revoke",
            "/roles",
            "/roles/root",
            "/roles/x/update",
            "/roles/x/y/z",
            "/users/é",
            "//",
            "/users/../..",
            "/roles/\u{0}",
        ];
        let bodies: [&[u8]; 9] = [
            b"",
            b"null",
            b"[]",
            b"{}",
            b"{\"user\":\"u\",\"password\":\"p\",\"roles\":[\"a\"],\"grant\":[\"b\"]}",
            b"{\"role\":\"x\",\"permissions\":{\"kv\":{\"read\":[\"\"]}},\"grant\":{\"kv\":null}}",
            b"{\"user\":5}",
            b"\xff\xfe",
            b"{\"role\":\"x\",\"grant\":{\"kv\":{\"read\":[\"/a\"]}},\"revoke\":{}}",
        ];
        let callers = [
            Caller::Anonymous,
            Caller::BadCredentials,
            Caller::User("u".into()),
            Caller::User("root".into()),
        ];
        for enabled in [false, true] {
            st.enabled = enabled;
            for api in [Api::V2Auth, Api::Security] {
                for m in methods {
                    for p in paths {
                        for b in bodies {
                            for c in &callers {
                                if let Plan::Propose { op, render, .. } = plan(&st, api, m, p, b, c)
                                {
                                    let mut s2 = st.clone();
                                    let _ = render.render(s2.apply(&op.with_hash("h".into()), 1));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
