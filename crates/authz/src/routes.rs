//! The authorization table: every route the client port serves — each gRPC method, each JSON
//! gateway path, each plain HTTP path — and what it requires when auth is on. The front's
//! services enforce it (see actors/front's `guard.rs` and each service); `tests/integration/routes_audit.rs` walks every
//! row as nobody, as a user without the right and as one with it, and fails on a gRPC method
//! the protos define that is missing here. The HTTP side serves no path this table lacks
//! (`http_needs` gates the gateway, `/v2` and the plain routes), so a route added without a
//! row is unreachable, and its own tests fail.
//!
//! etcd keeps no such table; its holes (GHSA-q8m4-xhhv-38mg among them) were calls nobody had
//! listed. SECURITY.md lists the advisories each row answers.

/// What a route requires when auth is on (with auth off, every route is open, as in etcd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Anyone, logged in or not (a login, health, version, metrics).
    Anyone,
    /// Any logged-in user (etcd's `requireAuthInfo`).
    User,
    /// A logged-in user with read or write permission on the keys the request names: read for
    /// what it reads (ranges, compares, watches, `prev_kv`), write for what it writes.
    Keys,
    /// A logged-in user; unless root, permission on every key attached to the lease(s) named
    /// or listed (keepalive: write; time-to-live with keys, the lease list: read; revoke: write).
    LeaseKeys,
    /// Root, or a user asking about itself or a role it holds (UserGet, RoleGet).
    SelfOrRoot,
    /// The root role.
    Root,
    /// v2 API: judged by the v2 security store (seed 002, `/v2/security`), not by v3 auth; with
    /// v2 auth off, open, as in etcd 3.4.
    V2Acl,
    /// Peer-port only: not served on the client port at all.
    PeerOnly,
}

/// One gRPC method and the JSON gateway paths that run the same service code.
#[derive(Debug, Clone, Copy)]
pub struct GrpcRoute {
    /// `/package.Service/Method`.
    pub method: &'static str,
    pub needs: Needs,
    /// Gateway paths under `/v3/` (each also served under `/v3beta/`).
    pub gateway: &'static [&'static str],
}

/// One plain HTTP route (neither gRPC nor the JSON gateway).
#[derive(Debug, Clone, Copy)]
pub struct HttpRoute {
    /// An exact path, or a prefix when it ends in `/*` (the prefix itself matches too).
    pub path: &'static str,
    pub needs: Needs,
}

const fn g(method: &'static str, needs: Needs, gateway: &'static [&'static str]) -> GrpcRoute {
    GrpcRoute {
        method,
        needs,
        gateway,
    }
}

use Needs::*;

/// Every gRPC method of the client port, and of the peer port (marked [`Needs::PeerOnly`]).
pub const GRPC: &[GrpcRoute] = &[
    // KV: judged by the keys; Compact is root's since etcd 3.5.28.
    g("/etcdserverpb.KV/Range", Keys, &["/v3/kv/range"]),
    g("/etcdserverpb.KV/RangeStream", Keys, &[]),
    g("/etcdserverpb.KV/Put", Keys, &["/v3/kv/put"]),
    g(
        "/etcdserverpb.KV/DeleteRange",
        Keys,
        &["/v3/kv/deleterange"],
    ),
    g("/etcdserverpb.KV/Txn", Keys, &["/v3/kv/txn"]),
    g("/etcdserverpb.KV/Compact", Root, &["/v3/kv/compaction"]),
    g("/etcdserverpb.Watch/Watch", Keys, &["/v3/watch"]),
    // Lease: a logged-in user for all (3.5.28); the lease's keys for the rest.
    g("/etcdserverpb.Lease/LeaseGrant", User, &["/v3/lease/grant"]),
    g(
        "/etcdserverpb.Lease/LeaseRevoke",
        LeaseKeys,
        &["/v3/lease/revoke", "/v3/kv/lease/revoke"],
    ),
    g(
        "/etcdserverpb.Lease/LeaseKeepAlive",
        LeaseKeys,
        &["/v3/lease/keepalive"],
    ),
    g(
        "/etcdserverpb.Lease/LeaseTimeToLive",
        LeaseKeys,
        &["/v3/lease/timetolive", "/v3/kv/lease/timetolive"],
    ),
    g(
        "/etcdserverpb.Lease/LeaseLeases",
        LeaseKeys,
        &["/v3/lease/leases", "/v3/kv/lease/leases"],
    ),
    // Cluster: changes are root's; the list a logged-in user's (3.5.28).
    g(
        "/etcdserverpb.Cluster/MemberAdd",
        Root,
        &["/v3/cluster/member/add"],
    ),
    g(
        "/etcdserverpb.Cluster/MemberRemove",
        Root,
        &["/v3/cluster/member/remove"],
    ),
    g(
        "/etcdserverpb.Cluster/MemberUpdate",
        Root,
        &["/v3/cluster/member/update"],
    ),
    g(
        "/etcdserverpb.Cluster/MemberList",
        User,
        &["/v3/cluster/member/list"],
    ),
    g(
        "/etcdserverpb.Cluster/MemberPromote",
        Root,
        &["/v3/cluster/member/promote"],
    ),
    // Maintenance: Status for logged-in users, Alarm's list too (its other actions need
    // root: enforced in the service), the rest root's.
    g(
        "/etcdserverpb.Maintenance/Alarm",
        User,
        &["/v3/maintenance/alarm"],
    ),
    g(
        "/etcdserverpb.Maintenance/Status",
        User,
        &["/v3/maintenance/status"],
    ),
    g(
        "/etcdserverpb.Maintenance/Defragment",
        Root,
        &["/v3/maintenance/defragment"],
    ),
    g(
        "/etcdserverpb.Maintenance/Hash",
        Root,
        &["/v3/maintenance/hash"],
    ),
    g(
        "/etcdserverpb.Maintenance/HashKV",
        Root,
        &["/v3/maintenance/hashkv"],
    ),
    g(
        "/etcdserverpb.Maintenance/Snapshot",
        Root,
        &["/v3/maintenance/snapshot"],
    ),
    g(
        "/etcdserverpb.Maintenance/MoveLeader",
        Root,
        &["/v3/maintenance/transfer-leadership"],
    ),
    g("/etcdserverpb.Maintenance/Downgrade", Root, &[]),
    // Auth: the store judges these as it applies them.
    g("/etcdserverpb.Auth/AuthEnable", Root, &["/v3/auth/enable"]),
    g(
        "/etcdserverpb.Auth/AuthDisable",
        Root,
        &["/v3/auth/disable"],
    ),
    // Anyone since etcd 3.7.0 (#20802): whether auth is on is no secret.
    g(
        "/etcdserverpb.Auth/AuthStatus",
        Anyone,
        &["/v3/auth/status"],
    ),
    g(
        "/etcdserverpb.Auth/Authenticate",
        Anyone,
        &["/v3/auth/authenticate"],
    ),
    g("/etcdserverpb.Auth/UserAdd", Root, &["/v3/auth/user/add"]),
    g(
        "/etcdserverpb.Auth/UserGet",
        SelfOrRoot,
        &["/v3/auth/user/get"],
    ),
    g("/etcdserverpb.Auth/UserList", Root, &["/v3/auth/user/list"]),
    g(
        "/etcdserverpb.Auth/UserDelete",
        Root,
        &["/v3/auth/user/delete"],
    ),
    g(
        "/etcdserverpb.Auth/UserChangePassword",
        Root,
        &["/v3/auth/user/changepw"],
    ),
    g(
        "/etcdserverpb.Auth/UserGrantRole",
        Root,
        &["/v3/auth/user/grant"],
    ),
    g(
        "/etcdserverpb.Auth/UserRevokeRole",
        Root,
        &["/v3/auth/user/revoke"],
    ),
    g("/etcdserverpb.Auth/RoleAdd", Root, &["/v3/auth/role/add"]),
    g(
        "/etcdserverpb.Auth/RoleGet",
        SelfOrRoot,
        &["/v3/auth/role/get"],
    ),
    g("/etcdserverpb.Auth/RoleList", Root, &["/v3/auth/role/list"]),
    g(
        "/etcdserverpb.Auth/RoleDelete",
        Root,
        &["/v3/auth/role/delete"],
    ),
    g(
        "/etcdserverpb.Auth/RoleGrantPermission",
        Root,
        &["/v3/auth/role/grant"],
    ),
    g(
        "/etcdserverpb.Auth/RoleRevokePermission",
        Root,
        &["/v3/auth/role/revoke"],
    ),
    // Lock and Election: each step an ordinary key request made as the caller.
    g("/v3lockpb.Lock/Lock", Keys, &["/v3/lock/lock"]),
    g("/v3lockpb.Lock/Unlock", Keys, &["/v3/lock/unlock"]),
    g(
        "/v3electionpb.Election/Campaign",
        Keys,
        &["/v3/election/campaign"],
    ),
    g(
        "/v3electionpb.Election/Proclaim",
        Keys,
        &["/v3/election/proclaim"],
    ),
    g(
        "/v3electionpb.Election/Leader",
        Keys,
        &["/v3/election/leader"],
    ),
    g(
        "/v3electionpb.Election/Observe",
        Keys,
        &["/v3/election/observe"],
    ),
    g(
        "/v3electionpb.Election/Resign",
        Keys,
        &["/v3/election/resign"],
    ),
    // The peer port's own service (member to member, mutual TLS where configured).
    g("/actcdpb.RaftPeer/Send", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/Members", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/Snapshot", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/LeaseRenew", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/LeaseTtl", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/LearnerReady", PeerOnly, &[]),
    g("/actcdpb.RaftPeer/HashKv", PeerOnly, &[]),
];

/// Every plain HTTP route of the client port.
pub const HTTP: &[HttpRoute] = &[
    HttpRoute {
        path: "/health",
        needs: Anyone,
    },
    HttpRoute {
        path: "/livez/*",
        needs: Anyone,
    },
    HttpRoute {
        path: "/readyz/*",
        needs: Anyone,
    },
    HttpRoute {
        path: "/version",
        needs: Anyone,
    },
    // etcd serves its metrics to anyone on the client port too.
    HttpRoute {
        path: "/metrics",
        needs: Anyone,
    },
    HttpRoute {
        path: "/v2/keys/*",
        needs: V2Acl,
    },
    HttpRoute {
        path: "/v2/auth/*",
        needs: V2Acl,
    },
    HttpRoute {
        path: "/v2/security/*",
        needs: V2Acl,
    },
    // Reading members is open in etcd 3.4's v2; changing them needs v2 root.
    HttpRoute {
        path: "/v2/members/*",
        needs: V2Acl,
    },
    HttpRoute {
        path: "/v2/machines",
        needs: Anyone,
    },
    HttpRoute {
        path: "/v2/stats/store",
        needs: Anyone,
    },
    HttpRoute {
        path: "/v2/stats/self",
        needs: Anyone,
    },
    HttpRoute {
        path: "/v2/stats/leader",
        needs: Anyone,
    },
];

/// The row of a gRPC method.
pub fn grpc_route(method: &str) -> Option<&'static GrpcRoute> {
    GRPC.iter().find(|r| r.method == method)
}

/// The gRPC method a gateway path (`/v3/…` or `/v3beta/…`) runs.
pub fn gateway_route(path: &str) -> Option<&'static GrpcRoute> {
    let rest = path
        .strip_prefix("/v3/")
        .or_else(|| path.strip_prefix("/v3beta/"))?;
    GRPC.iter().find(|r| {
        r.gateway
            .iter()
            .any(|p| p.strip_prefix("/v3/") == Some(rest))
    })
}

/// What an HTTP path requires; `None` for a path the client port does not serve.
pub fn http_needs(path: &str) -> Option<Needs> {
    if let Some(r) = gateway_route(path) {
        return Some(r.needs);
    }
    HTTP.iter()
        .find(|r| match r.path.strip_suffix("/*") {
            Some(prefix) => {
                path == prefix
                    || path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            None => path == r.path,
        })
        .map(|r| r.needs)
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
