//! The hostile run's auth phase: sets up etcd auth on the member (root with a password, one
//! user whose role may read and write only the `h/1` prefix), hands out the tokens the
//! stream's requests carry, and checks afterwards that nothing outside that prefix was
//! written, and no user, role, permission, member or the auth switch changed.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actcd_proto::authpb::{Permission, permission};
use actcd_proto::etcdserverpb::auth_client::AuthClient;
use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::{
    AuthDisableRequest, AuthEnableRequest, AuthRoleAddRequest, AuthRoleDeleteRequest,
    AuthRoleGetRequest, AuthRoleGrantPermissionRequest, AuthRoleListRequest, AuthStatusRequest,
    AuthUserAddRequest, AuthUserDeleteRequest, AuthUserGetRequest, AuthUserGrantRoleRequest,
    AuthUserListRequest, AuthenticateRequest, DeleteRangeRequest, LeaseLeasesRequest,
    LeaseRevokeRequest, MemberListRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
    request_op,
};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::cluster;

pub const USER: &str = "hostile-user";
pub const USER_PW: &str = "hostile-pw";
pub const ROLE: &str = "hostile-rw";
/// The user's role: read and write on `[h/1, h/2)`.
pub const PREFIX: &[u8] = b"h/1";
pub const PREFIX_END: &[u8] = b"h/2";
const ROOT_PW: &str = "hostile-root-pw";

/// The tokens of the phase (None outside it).
#[derive(Default)]
pub struct Tokens {
    pub root: Option<String>,
    pub user: Option<String>,
}

pub type SharedTokens = Arc<RwLock<Tokens>>;

/// Adds root's token, when there is one, to every call of a client.
#[derive(Clone)]
pub struct AsRoot(pub SharedTokens);

impl Interceptor for AsRoot {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let t = self
            .0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .root
            .clone();
        if let Some(v) = t.and_then(|t| t.parse().ok()) {
            req.metadata_mut().insert("token", v);
        }
        Ok(req)
    }
}

pub type Rooted = InterceptedService<Channel, AsRoot>;

pub fn kv(url: &str, t: &SharedTokens) -> KvClient<Rooted> {
    KvClient::with_interceptor(cluster::channel(url), AsRoot(t.clone()))
}

fn auth(url: &str, t: &SharedTokens) -> AuthClient<Rooted> {
    AuthClient::with_interceptor(cluster::channel(url), AsRoot(t.clone()))
}

/// A call bounded to 15 s (bcrypt in a debug build is slow).
async fn within<T>(
    what: &str,
    f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(15), f).await {
        Ok(Ok(r)) => Ok(r.into_inner()),
        Ok(Err(s)) => Err(format!("{what}: {:?} {}", s.code(), s.message())),
        Err(_) => Err(format!("{what}: no answer within 15 s")),
    }
}

/// A permission: (type, key, range end).
pub type Perm = (i32, Vec<u8>, Vec<u8>);

/// What the phase must leave as it found it.
#[derive(Debug, PartialEq)]
pub struct Guarded {
    /// Keys outside the user's prefix (and not the tool's own `\0` keys): key →
    /// (create, mod revision, version, lease).
    pub keys: BTreeMap<Vec<u8>, (i64, i64, i64, i64)>,
    pub users: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    pub roles: BTreeMap<Vec<u8>, Vec<Perm>>,
    pub members: usize,
    pub enabled: bool,
}

fn outside(k: &[u8]) -> bool {
    !(k.first() == Some(&0) || (k >= PREFIX && k < PREFIX_END))
}

/// Reads what [`Guarded`] holds (as root).
pub async fn guarded(url: &str, t: &SharedTokens) -> Result<Guarded, String> {
    let mut kv = kv(url, t).max_decoding_message_size(256 << 20);
    let all = within(
        "range all",
        kv.range(RangeRequest {
            key: vec![0],
            range_end: vec![0],
            keys_only: true,
            ..Default::default()
        }),
    )
    .await?;
    let keys = all
        .kvs
        .into_iter()
        .filter(|k| outside(&k.key))
        .map(|k| {
            (
                k.key,
                (k.create_revision, k.mod_revision, k.version, k.lease),
            )
        })
        .collect();
    let mut a = auth(url, t);
    let mut users = BTreeMap::new();
    for u in within("user list", a.user_list(AuthUserListRequest {}))
        .await?
        .users
    {
        let g = within(
            "user get",
            a.user_get(AuthUserGetRequest { name: u.clone() }),
        )
        .await?;
        let mut roles = g.roles;
        roles.sort();
        users.insert(u, roles);
    }
    let mut roles = BTreeMap::new();
    for r in within("role list", a.role_list(AuthRoleListRequest {}))
        .await?
        .roles
    {
        let g = within(
            "role get",
            a.role_get(AuthRoleGetRequest { role: r.clone() }),
        )
        .await?;
        let mut perms: Vec<_> = g
            .perm
            .into_iter()
            .map(|p| (p.perm_type, p.key, p.range_end))
            .collect();
        perms.sort();
        roles.insert(r, perms);
    }
    let enabled = within("auth status", a.auth_status(AuthStatusRequest {}))
        .await?
        .enabled;
    let mut c = ClusterClient::with_interceptor(cluster::channel(url), AsRoot(t.clone()));
    let members = within("member list", c.member_list(MemberListRequest::default()))
        .await?
        .members
        .len();
    Ok(Guarded {
        keys,
        users,
        roles,
        members,
        enabled,
    })
}

/// Authenticates `name`.
pub async fn login(url: &str, name: &str, pw: &str) -> Result<String, String> {
    let mut a = AuthClient::new(cluster::channel(url));
    Ok(within(
        "authenticate",
        a.authenticate(AuthenticateRequest {
            name: name.as_bytes().to_vec(),
            password: pw.as_bytes().to_vec(),
        }),
    )
    .await?
    .token)
}

/// Logs root and the user in again (simple tokens expire unused).
pub async fn refresh(url: &str, t: &SharedTokens) -> Result<(), String> {
    let root = login(url, "root", ROOT_PW).await?;
    let user = login(url, USER, USER_PW).await?;
    let mut w = t.write().unwrap_or_else(|p| p.into_inner());
    w.root = Some(root);
    w.user = Some(user);
    Ok(())
}

/// Clears what the open phase left (users, roles, leases, keys but the tool's), writes the
/// 200 `h/N` keys afresh, creates root and the narrow user and enables auth; logs both in.
pub async fn setup(url: &str, t: &SharedTokens) -> Result<Guarded, String> {
    let mut a = auth(url, t);
    for u in within("user list", a.user_list(AuthUserListRequest {}))
        .await?
        .users
    {
        within(
            "user delete",
            a.user_delete(AuthUserDeleteRequest { name: u }),
        )
        .await?;
    }
    for r in within("role list", a.role_list(AuthRoleListRequest {}))
        .await?
        .roles
    {
        within(
            "role delete",
            a.role_delete(AuthRoleDeleteRequest { role: r }),
        )
        .await?;
    }
    let mut l = LeaseClient::new(cluster::channel(url));
    for lease in within("lease leases", l.lease_leases(LeaseLeasesRequest {}))
        .await?
        .leases
    {
        // One may expire meanwhile.
        let _ = within(
            "lease revoke",
            l.lease_revoke(LeaseRevokeRequest { id: lease.id }),
        )
        .await;
    }
    let mut kv = kv(url, t);
    within(
        "delete all",
        kv.delete_range(DeleteRangeRequest {
            key: vec![1],
            range_end: vec![0],
            ..Default::default()
        }),
    )
    .await?;
    for chunk in (0..200).collect::<Vec<u32>>().chunks(100) {
        let success = chunk
            .iter()
            .map(|i| RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: format!("h/{i}").into_bytes(),
                    value: b"before-auth".to_vec(),
                    ..Default::default()
                })),
            })
            .collect();
        within(
            "canaries",
            kv.txn(TxnRequest {
                success,
                ..Default::default()
            }),
        )
        .await?;
    }
    within(
        "role add",
        a.role_add(AuthRoleAddRequest {
            name: ROLE.as_bytes().to_vec(),
        }),
    )
    .await?;
    within(
        "role grant",
        a.role_grant_permission(AuthRoleGrantPermissionRequest {
            name: ROLE.as_bytes().to_vec(),
            perm: Some(Permission {
                perm_type: permission::Type::Readwrite as i32,
                key: PREFIX.to_vec(),
                range_end: PREFIX_END.to_vec(),
            }),
        }),
    )
    .await?;
    for (name, pw, role) in [(USER, USER_PW, ROLE), ("root", ROOT_PW, "root")] {
        within(
            "user add",
            a.user_add(AuthUserAddRequest {
                name: name.as_bytes().to_vec(),
                password: pw.as_bytes().to_vec(),
                ..Default::default()
            }),
        )
        .await?;
        within(
            "user grant",
            a.user_grant_role(AuthUserGrantRoleRequest {
                user: name.as_bytes().to_vec(),
                role: role.as_bytes().to_vec(),
            }),
        )
        .await?;
    }
    within("auth enable", a.auth_enable(AuthEnableRequest {})).await?;
    refresh(url, t).await?;
    guarded(url, t).await
}

/// What changed between `before` and now, as violations.
pub async fn check(url: &str, t: &SharedTokens, before: &Guarded) -> Vec<String> {
    if let Err(e) = refresh(url, t).await {
        return vec![format!("auth phase: cannot log root in after it: {e}")];
    }
    let now = match guarded(url, t).await {
        Ok(g) => g,
        Err(e) => return vec![format!("auth phase: cannot read the state after it: {e}")],
    };
    let mut v = Vec::new();
    let show = |k: &[u8]| String::from_utf8_lossy(&k[..k.len().min(60)]).into_owned();
    for (k, b) in &before.keys {
        match now.keys.get(k) {
            None => v.push(format!("write past auth: key {:?} deleted", show(k))),
            Some(n) if n != b => v.push(format!(
                "write past auth: key {:?} (create, mod, version, lease) {b:?} -> {n:?}",
                show(k)
            )),
            _ => {}
        }
    }
    for (k, n) in &now.keys {
        if !before.keys.contains_key(k) {
            v.push(format!(
                "write past auth: key {:?} created (create, mod, version, lease) {n:?}",
                show(k)
            ));
        }
    }
    v.truncate(20);
    if now.users != before.users {
        let users = |g: &Guarded| -> Vec<(String, Vec<String>)> {
            g.users
                .iter()
                .map(|(u, r)| (show(u), r.iter().map(|r| show(r)).collect()))
                .collect()
        };
        v.push(format!(
            "write past auth: users (with their roles) {:?} -> {:?}",
            users(before),
            users(&now)
        ));
    }
    if now.roles != before.roles {
        type Shown = (i32, String, String);
        let roles = |g: &Guarded| -> Vec<(String, Vec<Shown>)> {
            g.roles
                .iter()
                .map(|(r, ps)| {
                    let ps = ps.iter().map(|(t, k, e)| (*t, show(k), show(e))).collect();
                    (show(r), ps)
                })
                .collect()
        };
        v.push(format!(
            "write past auth: roles (with their permissions) {:?} -> {:?}",
            roles(before),
            roles(&now)
        ));
    }
    if now.members != before.members {
        v.push(format!(
            "write past auth: {} members -> {}",
            before.members, now.members
        ));
    }
    if !now.enabled {
        v.push("write past auth: auth was disabled".to_owned());
    }
    v
}

/// Disables auth (as root) and forgets the tokens.
pub async fn disable(url: &str, t: &SharedTokens) -> Result<(), String> {
    let mut a = auth(url, t);
    within("auth disable", a.auth_disable(AuthDisableRequest {})).await?;
    let mut w = t.write().unwrap_or_else(|p| p.into_inner());
    *w = Tokens::default();
    Ok(())
}
