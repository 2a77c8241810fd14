//! The authorization audit: every row of the front's route table (`actcd_front::routes`) is
//! called on a real member with auth on, as nobody, as a user without the right the row names
//! and as one with it, over gRPC and over the JSON gateway (`/v3/` and `/v3beta/`), and the
//! answers must be what the row says. A gRPC method the protos define without a row fails the
//! audit; so does a row whose method or path the member does not serve.
//!
//! "Refused" means one of the auth refusals a client sees (`user name is empty`, `permission
//! denied`, `invalid auth token`, in etcd's converted or unconverted words); "let through"
//! means any other answer — a call may still fail for its own reasons (a member id that does
//! not exist, a downgrade actcd cannot make), which is not what is audited here.

use std::time::Duration;

use actcd_front::routes::{self, Needs};
use actcd_proto::authpb::{Permission, permission::Type as PermType};
use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::*;
use actcd_proto::v3electionpb::election_client::ElectionClient;
use actcd_proto::v3electionpb::{
    CampaignRequest, LeaderKey, LeaderRequest, ProclaimRequest, ResignRequest,
};
use actcd_proto::v3lockpb::lock_client::LockClient;
use actcd_proto::v3lockpb::{LockRequest, UnlockRequest};
use tonic::Status;

use crate::Server;
use crate::auth::{As, add_users, channel};
use crate::security::{b64, login};

/// Whether an answer is an auth refusal.
fn refused(text: &str) -> bool {
    [
        "user name is empty",
        "permission denied",
        "invalid auth token",
    ]
    .iter()
    .any(|r| text.contains(r))
}

fn status_text(s: &Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

/// Everything the calls need: the identities and alice's leased key.
struct World {
    root: As,
    alice: As,
    eve: As,
    nobody: As,
    tokens: [(String, Option<String>); 4],
    /// alice's lease, holding `a/leased`.
    lease: i64,
    member_id: u64,
}

async fn world(srv: &Server) -> World {
    let ch = channel(srv.port).await;
    let nobody = As {
        channel: ch.clone(),
        token: None,
    };
    add_users(
        &nobody,
        &[
            ("root", &[]),
            ("alice", &[(PermType::Readwrite, "a/", b"a0")]),
            ("eve", &[]),
            ("tmp", &[]),
        ],
    )
    .await;
    let mut a = nobody.auth();
    a.role_add(AuthRoleAddRequest {
        name: "tmp-role".into(),
    })
    .await
    .unwrap();
    let lease = LeaseClient::new(ch.clone())
        .lease_grant(LeaseGrantRequest { ttl: 600, id: 0 })
        .await
        .unwrap()
        .into_inner()
        .id;
    nobody
        .kv()
        .put(PutRequest {
            key: b"a/leased".to_vec(),
            lease,
            ..Default::default()
        })
        .await
        .unwrap();
    let member_id = MaintenanceClient::new(ch.clone())
        .status(StatusRequest {})
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .member_id;
    a.auth_enable(AuthEnableRequest {}).await.unwrap();
    let (root, root_token) = login(&ch, "root").await;
    let (alice, alice_token) = login(&ch, "alice").await;
    let (eve, eve_token) = login(&ch, "eve").await;
    World {
        root,
        alice,
        eve,
        nobody,
        tokens: [
            ("nobody".into(), None),
            ("eve".into(), Some(eve_token)),
            ("alice".into(), Some(alice_token)),
            ("root".into(), Some(root_token)),
        ],
        lease,
        member_id,
    }
}

/// The first message of a server stream, or a timeout (a call that waits, such as Observe with
/// no leader, was let through).
async fn first<T>(r: Result<tonic::Response<tonic::Streaming<T>>, Status>) -> Result<(), String> {
    let mut s = r.map_err(|e| status_text(&e))?.into_inner();
    match tokio::time::timeout(Duration::from_secs(2), s.message()).await {
        Ok(Err(e)) => Err(status_text(&e)),
        _ => Ok(()),
    }
}

fn unit<T>(r: Result<tonic::Response<T>, Status>) -> Result<(), String> {
    r.map(|_| ()).map_err(|e| status_text(&e))
}

/// One call of `method` as `who`, with a request that names keys under `a/` (alice's), alice's
/// lease, and alice or her role where a user or role is named. `Err` is the answer's text.
async fn call(method: &str, who: &As, w: &World, tag: &str) -> Result<(), String> {
    let ch = who.channel.clone();
    let key = |k: &str| format!("a/{k}-{tag}").into_bytes();
    let put = |k: &str| PutRequest {
        key: key(k),
        value: b"v".to_vec(),
        ..Default::default()
    };
    let name = method.rsplit('/').next().unwrap();
    match method.split('/').nth(1).unwrap() {
        "etcdserverpb.KV" => {
            let mut kv = who.kv();
            match name {
                "Range" => unit(
                    kv.range(who.req(RangeRequest {
                        key: key("r"),
                        ..Default::default()
                    }))
                    .await,
                ),
                "RangeStream" => {
                    first(
                        kv.range_stream(who.req(RangeRequest {
                            key: key("r"),
                            ..Default::default()
                        }))
                        .await,
                    )
                    .await
                }
                "Put" => unit(kv.put(who.req(put("p"))).await),
                "DeleteRange" => unit(
                    kv.delete_range(who.req(DeleteRangeRequest {
                        key: key("p"),
                        ..Default::default()
                    }))
                    .await,
                ),
                "Txn" => unit(
                    kv.txn(who.req(TxnRequest {
                        success: vec![RequestOp {
                            request: Some(request_op::Request::RequestPut(put("t"))),
                        }],
                        ..Default::default()
                    }))
                    .await,
                ),
                "Compact" => unit(
                    kv.compact(who.req(CompactionRequest {
                        revision: 1,
                        physical: false,
                    }))
                    .await,
                ),
                other => panic!("no sample call for KV/{other}"),
            }
        }
        "etcdserverpb.Watch" => {
            let create = WatchRequest {
                request_union: Some(watch_request::RequestUnion::CreateRequest(
                    WatchCreateRequest {
                        key: b"a/".to_vec(),
                        range_end: b"a0".to_vec(),
                        ..Default::default()
                    },
                )),
            };
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tx.send(create).await.unwrap();
            let r = WatchClient::new(ch)
                .watch(who.req(tokio_stream::wrappers::ReceiverStream::new(rx)))
                .await;
            let mut s = r.map_err(|e| status_text(&e))?.into_inner();
            let answer = tokio::time::timeout(Duration::from_secs(10), s.message())
                .await
                .map_err(|_| "no answer".to_string())?;
            drop(tx);
            match answer {
                Ok(Some(r)) if r.canceled => Err(r.cancel_reason),
                Ok(_) => Ok(()),
                Err(e) => Err(status_text(&e)),
            }
        }
        "etcdserverpb.Lease" => {
            let mut l = LeaseClient::new(ch);
            match name {
                "LeaseGrant" => unit(
                    l.lease_grant(who.req(LeaseGrantRequest { ttl: 60, id: 0 }))
                        .await,
                ),
                "LeaseRevoke" => {
                    let id = revocable(w, tag).await;
                    unit(l.lease_revoke(who.req(LeaseRevokeRequest { id })).await)
                }
                "LeaseKeepAlive" => {
                    let reqs = futures::stream::iter(vec![LeaseKeepAliveRequest { id: w.lease }]);
                    first(l.lease_keep_alive(who.req(reqs)).await).await
                }
                "LeaseTimeToLive" => unit(
                    l.lease_time_to_live(who.req(LeaseTimeToLiveRequest {
                        id: w.lease,
                        keys: true,
                    }))
                    .await,
                ),
                "LeaseLeases" => unit(l.lease_leases(who.req(LeaseLeasesRequest {})).await),
                other => panic!("no sample call for Lease/{other}"),
            }
        }
        "etcdserverpb.Cluster" => {
            let mut c = ClusterClient::new(ch);
            let nowhere = 0xdead_beef;
            match name {
                // A learner: even if it were added, the one voter keeps its quorum.
                "MemberAdd" => unit(
                    c.member_add(who.req(MemberAddRequest {
                        peer_ur_ls: vec!["http://127.0.0.1:1".into()],
                        is_learner: true,
                    }))
                    .await,
                ),
                "MemberRemove" => unit(
                    c.member_remove(who.req(MemberRemoveRequest { id: nowhere }))
                        .await,
                ),
                "MemberUpdate" => unit(
                    c.member_update(who.req(MemberUpdateRequest {
                        id: nowhere,
                        peer_ur_ls: vec!["http://127.0.0.1:2".into()],
                    }))
                    .await,
                ),
                "MemberList" => unit(c.member_list(who.req(MemberListRequest::default())).await),
                "MemberPromote" => unit(
                    c.member_promote(who.req(MemberPromoteRequest { id: nowhere }))
                        .await,
                ),
                other => panic!("no sample call for Cluster/{other}"),
            }
        }
        "etcdserverpb.Maintenance" => {
            let mut m = MaintenanceClient::new(ch);
            match name {
                "Alarm" => unit(
                    m.alarm(who.req(AlarmRequest {
                        action: alarm_request::AlarmAction::Get as i32,
                        ..Default::default()
                    }))
                    .await,
                ),
                "Status" => unit(m.status(who.req(StatusRequest {})).await),
                "Defragment" => unit(m.defragment(who.req(DefragmentRequest {})).await),
                "Hash" => unit(m.hash(who.req(HashRequest {})).await),
                "HashKV" => unit(m.hash_kv(who.req(HashKvRequest { revision: 0 })).await),
                "Snapshot" => first(m.snapshot(who.req(SnapshotRequest {})).await).await,
                "MoveLeader" => unit(
                    m.move_leader(who.req(MoveLeaderRequest {
                        target_id: w.member_id,
                    }))
                    .await,
                ),
                "Downgrade" => unit(
                    m.downgrade(who.req(DowngradeRequest {
                        action: downgrade_request::DowngradeAction::Validate as i32,
                        version: "3.4".into(),
                    }))
                    .await,
                ),
                other => panic!("no sample call for Maintenance/{other}"),
            }
        }
        "etcdserverpb.Auth" => {
            let mut a = who.auth();
            let user = format!("u-{tag}");
            let role = format!("r-{tag}");
            match name {
                "AuthEnable" => unit(a.auth_enable(who.req(AuthEnableRequest {})).await),
                // Run last (see the walk): a let-through disable ends the audit's auth.
                "AuthDisable" => unit(a.auth_disable(who.req(AuthDisableRequest {})).await),
                "AuthStatus" => unit(a.auth_status(who.req(AuthStatusRequest {})).await),
                "Authenticate" => unit(
                    a.authenticate(who.req(AuthenticateRequest {
                        name: "eve".into(),
                        password: "eve-pw".into(),
                    }))
                    .await,
                ),
                "UserAdd" => unit(
                    a.user_add(who.req(AuthUserAddRequest {
                        name: user.clone().into_bytes(),
                        password: b"pw".to_vec(),
                        ..Default::default()
                    }))
                    .await,
                ),
                "UserGet" => unit(
                    a.user_get(who.req(AuthUserGetRequest {
                        name: "alice".into(),
                    }))
                    .await,
                ),
                "UserList" => unit(a.user_list(who.req(AuthUserListRequest {})).await),
                "UserDelete" => unit(
                    a.user_delete(who.req(AuthUserDeleteRequest {
                        name: "no-such-user".into(),
                    }))
                    .await,
                ),
                "UserChangePassword" => unit(
                    a.user_change_password(who.req(AuthUserChangePasswordRequest {
                        name: "tmp".into(),
                        password: b"tmp-pw".to_vec(),
                        ..Default::default()
                    }))
                    .await,
                ),
                "UserGrantRole" => unit(
                    a.user_grant_role(who.req(AuthUserGrantRoleRequest {
                        user: "tmp".into(),
                        role: "tmp-role".into(),
                    }))
                    .await,
                ),
                "UserRevokeRole" => unit(
                    a.user_revoke_role(who.req(AuthUserRevokeRoleRequest {
                        name: "tmp".into(),
                        role: "tmp-role".into(),
                    }))
                    .await,
                ),
                "RoleAdd" => unit(
                    a.role_add(who.req(AuthRoleAddRequest {
                        name: role.clone().into_bytes(),
                    }))
                    .await,
                ),
                "RoleGet" => unit(
                    a.role_get(who.req(AuthRoleGetRequest {
                        role: "alice-role".into(),
                    }))
                    .await,
                ),
                "RoleList" => unit(a.role_list(who.req(AuthRoleListRequest {})).await),
                "RoleDelete" => unit(
                    a.role_delete(who.req(AuthRoleDeleteRequest {
                        role: "no-such-role".into(),
                    }))
                    .await,
                ),
                "RoleGrantPermission" => unit(
                    a.role_grant_permission(who.req(AuthRoleGrantPermissionRequest {
                        name: "tmp-role".into(),
                        perm: Some(Permission {
                            perm_type: PermType::Read as i32,
                            key: b"t".to_vec(),
                            range_end: vec![],
                        }),
                    }))
                    .await,
                ),
                "RoleRevokePermission" => unit(
                    a.role_revoke_permission(who.req(AuthRoleRevokePermissionRequest {
                        role: "tmp-role".into(),
                        key: b"no-such-key".to_vec(),
                        range_end: vec![],
                    }))
                    .await,
                ),
                other => panic!("no sample call for Auth/{other}"),
            }
        }
        "v3lockpb.Lock" => {
            let mut l = LockClient::new(ch);
            match name {
                "Lock" => unit(
                    l.lock(who.req(LockRequest {
                        name: key("lock"),
                        lease: w.lease,
                    }))
                    .await,
                ),
                "Unlock" => unit(
                    l.unlock(who.req(UnlockRequest { key: key("lock/1") }))
                        .await,
                ),
                other => panic!("no sample call for Lock/{other}"),
            }
        }
        "v3electionpb.Election" => {
            let mut e = ElectionClient::new(ch);
            let leader = LeaderKey {
                name: key("elect"),
                key: key("elect/1"),
                rev: 1,
                lease: w.lease,
            };
            match name {
                "Campaign" => unit(
                    e.campaign(who.req(CampaignRequest {
                        name: key("elect"),
                        lease: w.lease,
                        value: b"v".to_vec(),
                    }))
                    .await,
                ),
                "Proclaim" => unit(
                    e.proclaim(who.req(ProclaimRequest {
                        leader: Some(leader),
                        value: b"v".to_vec(),
                    }))
                    .await,
                ),
                "Leader" => unit(
                    e.leader(who.req(LeaderRequest { name: key("elect") }))
                        .await,
                ),
                // A refused observer's stream ends at once with nothing, as etcd's observer
                // closes its channel; one let through waits for a leader.
                "Observe" => {
                    let r = e
                        .observe(who.req(LeaderRequest { name: key("elect") }))
                        .await;
                    let mut s = r.map_err(|e| status_text(&e))?.into_inner();
                    match tokio::time::timeout(Duration::from_secs(2), s.message()).await {
                        Ok(Ok(None)) => Err("permission denied: the observer ended at once".into()),
                        Ok(Err(e)) => Err(status_text(&e)),
                        _ => Ok(()),
                    }
                }
                "Resign" => unit(
                    e.resign(who.req(ResignRequest {
                        leader: Some(leader),
                    }))
                    .await,
                ),
                other => panic!("no sample call for Election/{other}"),
            }
        }
        "actcdpb.RaftPeer" => {
            // Never served on the client port: any call there is Unimplemented.
            let mut grpc = tonic::client::Grpc::new(ch);
            grpc.ready().await.map_err(|e| e.to_string())?;
            let path =
                http::uri::PathAndQuery::from_static(routes::grpc_route(method).unwrap().method);
            let codec: tonic_prost::ProstCodec<StatusRequest, StatusResponse> =
                tonic_prost::ProstCodec::default();
            unit(grpc.unary(who.req(StatusRequest {}), path, codec).await)
        }
        other => panic!("no sample calls for service {other}"),
    }
}

/// A lease of its own holding one of alice's keys, so a revoke that is let through leaves the
/// others alone.
async fn revocable(w: &World, tag: &str) -> i64 {
    let id = w
        .root
        .lease()
        .lease_grant(w.root.req(LeaseGrantRequest { ttl: 60, id: 0 }))
        .await
        .unwrap()
        .into_inner()
        .id;
    w.root
        .kv()
        .put(w.root.req(PutRequest {
            key: format!("a/revoked-{tag}").into_bytes(),
            lease: id,
            ..Default::default()
        }))
        .await
        .unwrap();
    id
}

/// Who must be refused and who let through, by what a row needs: (nobody, without, with).
fn identities<'a>(needs: Needs, method: &str, w: &'a World) -> [(&'static str, &'a As, bool); 3] {
    match needs {
        Needs::Anyone => [
            ("nobody", &w.nobody, true),
            ("eve", &w.eve, true),
            ("alice", &w.alice, true),
        ],
        Needs::User => [
            ("nobody", &w.nobody, false),
            ("eve", &w.eve, true),
            ("alice", &w.alice, true),
        ],
        // The samples name alice's keys, her lease, herself and her role: she is "with", eve
        // "without".
        Needs::Keys | Needs::LeaseKeys | Needs::SelfOrRoot => [
            ("nobody", &w.nobody, false),
            ("eve", &w.eve, false),
            ("alice", &w.alice, true),
        ],
        Needs::Root => [
            ("nobody", &w.nobody, false),
            ("alice", &w.alice, false),
            ("root", &w.root, true),
        ],
        Needs::V2Acl | Needs::PeerOnly => panic!("{method}: not a v3 client-port row"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_as_the_table_says() {
    // Every gRPC method the protos define has a row, and every row is a method they define.
    let pool = prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut defined = Vec::new();
    for service in pool.services() {
        for m in service.methods() {
            defined.push(format!("/{}/{}", service.full_name(), m.name()));
        }
    }
    let missing: Vec<&String> = defined
        .iter()
        .filter(|m| routes::grpc_route(m).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "methods without a row in routes.rs: {missing:?}"
    );
    for r in routes::GRPC {
        assert!(
            defined.iter().any(|d| d == r.method),
            "{}: no such method",
            r.method
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--enable-v2"]);
    let w = world(&srv).await;
    let mut wrong = Vec::new();
    // AuthDisable last: once let through, auth is off.
    let mut rows: Vec<&routes::GrpcRoute> = routes::GRPC.iter().collect();
    rows.sort_by_key(|r| r.method.ends_with("/AuthDisable"));
    for (n, row) in rows.iter().enumerate() {
        if row.needs == Needs::PeerOnly {
            let got = call(row.method, &w.root, &w, "peer").await;
            if !got.as_ref().is_err_and(|e| e.starts_with("Unimplemented")) {
                wrong.push(format!("{} on the client port: {got:?}", row.method));
            }
            continue;
        }
        if row.method.ends_with("/AuthDisable") {
            // The gateway's walk needs auth on: do it before the last gRPC call.
            gateway_walk(&srv, &w, &mut wrong).await;
        }
        for (i, (name, who, let_through)) in identities(row.needs, row.method, &w)
            .into_iter()
            .enumerate()
        {
            let got = call(row.method, who, &w, &format!("{n}-{i}")).await;
            let was_refused = got.as_ref().is_err_and(|e| refused(e));
            if was_refused == let_through {
                wrong.push(format!(
                    "{} ({:?}) as {name}: {}",
                    row.method,
                    row.needs,
                    got.err().unwrap_or_else(|| "let through".into())
                ));
            }
        }
    }
    // The plain HTTP rows: anyone reaches them (v2's own auth is off here); a path no row
    // names is not served.
    for row in routes::HTTP {
        let path = match row.path {
            "/v2/auth/*" => "/v2/auth/enable",
            "/v2/security/*" => "/v2/security/users",
            "/v2/keys/*" => "/v2/keys/",
            other => other.trim_end_matches("/*"),
        };
        let (status, body) = http(&srv, "GET", path, "", None).await;
        if status == 404 || status == 401 || status == 403 || refused(&body) {
            wrong.push(format!(
                "GET {path} ({:?}) as nobody: {status} {body}",
                row.needs
            ));
        }
    }
    for path in [
        "/debug/pprof/",
        "/v2/nothing",
        "/v3/kv/nothing",
        "/v3beta/nothing",
        "/nothing",
    ] {
        let (status, _) = http(&srv, "GET", path, "", None).await;
        if status != 404 {
            wrong.push(format!("GET {path}: {status}, not 404"));
        }
    }
    assert!(
        wrong.is_empty(),
        "the route table and the member disagree:\n{}",
        wrong.join("\n")
    );
}

/// The gateway paths of every row, under `/v3/` and `/v3beta/`, as the identities of the row.
async fn gateway_walk(srv: &Server, w: &World, wrong: &mut Vec<String>) {
    let token = |name: &str| {
        w.tokens
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, t)| t.clone())
    };
    for (n, row) in routes::GRPC.iter().enumerate() {
        if row.method.ends_with("/AuthDisable") {
            continue;
        }
        for path in row.gateway {
            for prefix in ["/v3/", "/v3beta/"] {
                let path = format!("{prefix}{}", path.strip_prefix("/v3/").unwrap());
                for (i, (name, _, let_through)) in
                    identities(row.needs, row.method, w).into_iter().enumerate()
                {
                    let tag = format!("gw{n}-{i}-{}", prefix.len());
                    let body = if row.method.ends_with("/LeaseRevoke") {
                        // A lease of its own, holding one of alice's keys (as in `call`).
                        format!(r#"{{"ID":"{}"}}"#, revocable(w, &tag).await)
                    } else {
                        gateway_body(row.method, w, &tag)
                    };
                    let (status, out) =
                        http(srv, "POST", &path, &body, token(name).as_deref()).await;
                    let not_served = status == 404 && out.trim() == "Not Found";
                    // An observer refused ends at once, its stream empty (see `call`).
                    let ended_empty = row.method.ends_with("/Observe") && out.trim() == "0";
                    if not_served || (refused(&out) || ended_empty) == let_through {
                        wrong.push(format!(
                            "POST {path} ({:?}) as {name}: {status} {out}",
                            row.needs
                        ));
                    }
                }
            }
        }
    }
}

/// The JSON of [`call`]'s sample request for `method`.
fn gateway_body(method: &str, w: &World, tag: &str) -> String {
    let key = |k: &str| b64(format!("a/{k}-{tag}").as_bytes());
    let lease = w.lease;
    match method.rsplit('/').next().unwrap() {
        "Range" => format!(r#"{{"key":"{}"}}"#, key("r")),
        "Put" => format!(r#"{{"key":"{}","value":"dg=="}}"#, key("p")),
        "DeleteRange" => format!(r#"{{"key":"{}"}}"#, key("p")),
        "Txn" => format!(
            r#"{{"success":[{{"requestPut":{{"key":"{}","value":"dg=="}}}}]}}"#,
            key("t")
        ),
        "Compact" => r#"{"revision":"1"}"#.into(),
        "Watch" => r#"{"create_request":{"key":"YS8=","range_end":"YTA="}}"#.into(),
        "LeaseGrant" => r#"{"TTL":"60"}"#.into(),
        // An unknown lease has no keys: a revoke let through answers "lease not found".
        "LeaseRevoke" => r#"{"ID":"12345"}"#.into(),
        "LeaseKeepAlive" => format!(r#"{{"ID":"{lease}"}}"#),
        "LeaseTimeToLive" => format!(r#"{{"ID":"{lease}","keys":true}}"#),
        "MemberAdd" => r#"{"peerURLs":["http://127.0.0.1:1"],"isLearner":true}"#.into(),
        "MemberRemove" | "MemberPromote" => r#"{"ID":"3735928559"}"#.into(),
        "MemberUpdate" => r#"{"ID":"3735928559","peerURLs":["http://127.0.0.1:2"]}"#.into(),
        "Alarm" => r#"{"action":"GET"}"#.into(),
        "MoveLeader" => format!(r#"{{"targetID":"{}"}}"#, w.member_id),
        "Authenticate" => r#"{"name":"eve","password":"eve-pw"}"#.into(),
        "UserAdd" => format!(r#"{{"name":"u-{tag}","password":"pw"}}"#),
        "UserGet" => r#"{"name":"alice"}"#.into(),
        "UserDelete" => r#"{"name":"no-such-user"}"#.into(),
        "UserChangePassword" => r#"{"name":"tmp","password":"tmp-pw"}"#.into(),
        "UserGrantRole" => r#"{"user":"tmp","role":"tmp-role"}"#.into(),
        "UserRevokeRole" => r#"{"name":"tmp","role":"tmp-role"}"#.into(),
        "RoleAdd" => format!(r#"{{"name":"r-{tag}"}}"#),
        "RoleGet" => r#"{"role":"alice-role"}"#.into(),
        "RoleDelete" => r#"{"role":"no-such-role"}"#.into(),
        "RoleGrantPermission" => {
            r#"{"name":"tmp-role","perm":{"permType":"READ","key":"dA=="}}"#.into()
        }
        "RoleRevokePermission" => r#"{"role":"tmp-role","key":"bm8="}"#.into(),
        "Lock" => format!(r#"{{"name":"{}","lease":"{lease}"}}"#, key("lock")),
        "Unlock" => format!(r#"{{"key":"{}"}}"#, key("lock/1")),
        "Campaign" => format!(
            r#"{{"name":"{}","lease":"{lease}","value":"dg=="}}"#,
            key("elect")
        ),
        "Leader" | "Observe" => format!(r#"{{"name":"{}"}}"#, key("elect")),
        "Proclaim" | "Resign" => format!(
            r#"{{"leader":{{"name":"{}","key":"{}","rev":"1","lease":"{lease}"}},"value":"dg=="}}"#,
            key("elect"),
            key("elect/1")
        ),
        _ => "{}".into(),
    }
}

/// One HTTP request: (status, body). A stream is read up to its first answer, or for 3 s.
async fn http(
    srv: &Server,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> (u16, String) {
    let first_answer = |raw: &str| raw.contains("chunked") && raw.matches("\r\n").count() > 8;
    let (status, _, body) = crate::gateway::send_as(
        &srv.endpoint(),
        method,
        path,
        body.as_bytes(),
        token,
        &first_answer,
        Duration::from_secs(3),
    )
    .await;
    (status, body)
}
