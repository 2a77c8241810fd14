//! The etcd security advisories since 3.5.1 that actcd once shared, each tried as an attacker
//! would against a real member with auth on, over gRPC and over the JSON gateway. actcd answers
//! as the etcd release that fixed each one (see SECURITY.md), not as etcd 3.5.1, which is why
//! these tests assert recorded answers instead of comparing with a 3.5.1 binary.
//!
//! The cast: root; `alice` reads and writes `[a/, a0)`; `bob` writes (only) `[foo, zoo)`;
//! `carol` reads the one key `w`; root's secrets live under `s/`, `s/lease-secret` attached to
//! root's lease `L`.

use std::time::Duration;

use actcd_proto::authpb::permission::Type as PermType;
use actcd_proto::etcdserverpb::cluster_client::ClusterClient;
use actcd_proto::etcdserverpb::lease_client::LeaseClient;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::watch_client::WatchClient;
use actcd_proto::etcdserverpb::*;

use crate::Server;
use crate::auth::{As, add_users, channel, outcome};

const L: i64 = 0x5ec;
const EMPTY: &str = "InvalidArgument: etcdserver: user name is empty";
const DENIED: &str = "PermissionDenied: etcdserver: permission denied";
const NOSPACE: &str = "ResourceExhausted: etcdserver: mvcc: database space exceeded";
const OK: &str = "ok";

struct Cast {
    root: As,
    alice: As,
    bob: As,
    carol: As,
    nobody: As,
    /// Tokens for the gateway's `Authorization` header.
    root_token: String,
    alice_token: String,
    bob_token: String,
    carol_token: String,
}

/// Base64, as the gateway carries bytes.
pub(crate) fn b64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Logs `name` in with the password `<name>-pw`: a client carrying its token, and the token
/// for the gateway's `Authorization` header.
pub(crate) async fn login(ch: &tonic::transport::Channel, name: &str) -> (As, String) {
    let resp = actcd_proto::etcdserverpb::auth_client::AuthClient::new(ch.clone())
        .authenticate(AuthenticateRequest {
            name: name.into(),
            password: format!("{name}-pw").into_bytes(),
        })
        .await
        .unwrap()
        .into_inner();
    (
        As {
            channel: ch.clone(),
            token: Some(resp.token.clone()),
        },
        resp.token,
    )
}

fn put(key: &str, value: &[u8]) -> PutRequest {
    PutRequest {
        key: key.into(),
        value: value.to_vec(),
        ..Default::default()
    }
}

/// Sets the cast up on a fresh member and turns auth on.
async fn cast(srv: &Server) -> Cast {
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
            ("bob", &[(PermType::Write, "foo", b"zoo")]),
            ("carol", &[(PermType::Read, "w", b"")]),
        ],
    )
    .await;
    let mut a = nobody.auth();
    let mut kv = nobody.kv();
    for (k, v) in [
        ("s/secret", "root's"),
        ("foo", "bob may not read this"),
        ("w", "w0"),
        ("a/x", "x0"),
    ] {
        kv.put(put(k, v.as_bytes())).await.unwrap();
    }
    LeaseClient::new(ch.clone())
        .lease_grant(LeaseGrantRequest { ttl: 600, id: L })
        .await
        .unwrap();
    kv.put(PutRequest {
        lease: L,
        ..put("s/lease-secret", b"leased")
    })
    .await
    .unwrap();
    a.auth_enable(AuthEnableRequest {}).await.unwrap();
    let (root, root_token) = login(&ch, "root").await;
    let (alice, alice_token) = login(&ch, "alice").await;
    let (bob, bob_token) = login(&ch, "bob").await;
    let (carol, carol_token) = login(&ch, "carol").await;
    Cast {
        root,
        alice,
        bob,
        carol,
        nobody,
        root_token,
        alice_token,
        bob_token,
        carol_token,
    }
}

impl As {
    fn maintenance(&self) -> MaintenanceClient<tonic::transport::Channel> {
        MaintenanceClient::new(self.channel.clone())
    }
}

/// The first answer of a keepalive stream for `id`.
async fn keep_alive(who: &As, id: i64) -> String {
    let reqs = futures::stream::iter(vec![LeaseKeepAliveRequest { id }]);
    let mut stream = match who.lease().lease_keep_alive(who.req(reqs)).await {
        Ok(s) => s.into_inner(),
        Err(s) => return format!("{:?}: {}", s.code(), s.message()),
    };
    match tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("keepalive answers")
    {
        Ok(Some(r)) if r.ttl > 0 => OK.into(),
        Ok(other) => format!("unexpected {other:?}"),
        Err(s) => format!("{:?}: {}", s.code(), s.message()),
    }
}

/// One gateway request: (status, body). A stream is read until `until` shows up in it.
async fn gateway(
    srv: &Server,
    path: &str,
    body: &str,
    token: Option<&str>,
    until: Option<&str>,
) -> (u16, String) {
    let done = |raw: &str| until.is_some_and(|u| raw.contains(u));
    let (status, _, body) = crate::gateway::send_as(
        &srv.endpoint(),
        "POST",
        path,
        body.as_bytes(),
        token,
        &done,
        Duration::from_secs(10),
    )
    .await;
    (status, body)
}

/// A gateway answer in the matrix's words: `ok`, or the HTTP status and etcd's message.
fn gw_outcome((status, body): (u16, String)) -> String {
    if status == 200 && !body.contains("\"error\"") {
        return OK.into();
    }
    let v: serde_json::Value =
        serde_json::from_str(body.lines().next().unwrap_or("")).unwrap_or(serde_json::Value::Null);
    let msg = v
        .get("error")
        .and_then(|e| e.get("message").or(Some(e)))
        .or_else(|| v.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or(&body)
        .to_string();
    format!("{status}: {msg}")
}

/// The member's alarms and root's view of `L` and of an old revision: what the refused calls
/// must not have changed.
async fn nothing_changed(c: &Cast) {
    let alarms = c
        .root
        .maintenance()
        .alarm(c.root.req(AlarmRequest {
            action: alarm_request::AlarmAction::Get as i32,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(alarms.alarms.is_empty(), "an alarm was raised: {alarms:?}");
    let ttl = c
        .root
        .lease()
        .lease_time_to_live(c.root.req(LeaseTimeToLiveRequest { id: L, keys: true }))
        .await
        .unwrap()
        .into_inner();
    assert!(ttl.ttl > 0, "L was revoked: {ttl:?}");
    assert_eq!(ttl.keys, vec![b"s/lease-secret".to_vec()]);
    // Revision 2 is the first put: still readable, so nothing was compacted.
    c.root
        .kv()
        .range(c.root.req(RangeRequest {
            key: b"s/secret".to_vec(),
            revision: 2,
            ..Default::default()
        }))
        .await
        .expect("nothing compacted");
}

/// GHSA-q8m4-xhhv-38mg (CVE-2026-33413, etcd 3.4.42 / 3.5.28 / 3.6.9) and CVE-2023-32082
/// (3.4.26 / 3.5.9): lease calls, member list, status and alarms need a logged-in user;
/// raising an alarm and compacting need root; a lease's keys, its keepalive and the lease list
/// need permission on the keys attached. etcd 3.5.1 answered every one of these to anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_member_status_alarm_and_compact_calls_need_the_rights_current_etcd_asks() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let c = cast(&srv).await;
    let rev = c
        .root
        .kv()
        .range(c.root.req(RangeRequest {
            key: b"w".to_vec(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .revision;
    let member_id = c
        .root
        .maintenance()
        .status(c.root.req(StatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .member_id;
    // alice's own lease, holding one of her keys: hers to see and keep alive.
    let own = c
        .alice
        .lease()
        .lease_grant(c.alice.req(LeaseGrantRequest { ttl: 600, id: 0 }))
        .await
        .unwrap()
        .into_inner()
        .id;
    c.alice
        .kv()
        .put(c.alice.req(PutRequest {
            lease: own,
            ..put("a/leased", b"v")
        }))
        .await
        .unwrap();

    let mut got = Vec::new();
    for (name, who) in [("nobody", &c.nobody), ("alice", &c.alice)] {
        let mut row = |call: &str, o: String| got.push(format!("{name:6} {call:28} {o}"));
        let mut lease = who.lease();
        row(
            "lease grant",
            outcome(
                lease
                    .lease_grant(who.req(LeaseGrantRequest { ttl: 60, id: 0 }))
                    .await,
            ),
        );
        row(
            "lease revoke L",
            outcome(
                lease
                    .lease_revoke(who.req(LeaseRevokeRequest { id: L }))
                    .await,
            ),
        );
        row("keepalive L", keep_alive(who, L).await);
        row("keepalive own", keep_alive(who, own).await);
        row(
            "lease list",
            outcome(lease.lease_leases(who.req(LeaseLeasesRequest {})).await),
        );
        row(
            "timetolive L keys",
            outcome(
                lease
                    .lease_time_to_live(who.req(LeaseTimeToLiveRequest { id: L, keys: true }))
                    .await,
            ),
        );
        row(
            "timetolive L",
            outcome(
                lease
                    .lease_time_to_live(who.req(LeaseTimeToLiveRequest { id: L, keys: false }))
                    .await,
            ),
        );
        let own_keys = lease
            .lease_time_to_live(who.req(LeaseTimeToLiveRequest {
                id: own,
                keys: true,
            }))
            .await;
        let o = match own_keys {
            Ok(r) if r.get_ref().keys == [b"a/leased".to_vec()] => OK.to_string(),
            Ok(r) => format!("keys {:?}", r.get_ref().keys),
            Err(s) => outcome::<()>(Err(s)),
        };
        row("timetolive own keys", o);
        row(
            "member list",
            outcome(
                ClusterClient::new(who.channel.clone())
                    .member_list(who.req(MemberListRequest::default()))
                    .await,
            ),
        );
        let mut m = who.maintenance();
        row("status", outcome(m.status(who.req(StatusRequest {})).await));
        row(
            "alarm list",
            outcome(
                m.alarm(who.req(AlarmRequest {
                    action: alarm_request::AlarmAction::Get as i32,
                    ..Default::default()
                }))
                .await,
            ),
        );
        row(
            "alarm raise NOSPACE",
            outcome(
                m.alarm(who.req(AlarmRequest {
                    action: alarm_request::AlarmAction::Activate as i32,
                    member_id,
                    alarm: AlarmType::Nospace as i32,
                }))
                .await,
            ),
        );
        row(
            "compact",
            outcome(
                who.kv()
                    .compact(who.req(CompactionRequest {
                        revision: rev,
                        physical: false,
                    }))
                    .await,
            ),
        );
    }
    let want = [
        ("nobody", "lease grant", EMPTY),
        ("nobody", "lease revoke L", EMPTY),
        ("nobody", "keepalive L", EMPTY),
        ("nobody", "keepalive own", EMPTY),
        ("nobody", "lease list", EMPTY),
        ("nobody", "timetolive L keys", EMPTY),
        ("nobody", "timetolive L", EMPTY),
        ("nobody", "timetolive own keys", EMPTY),
        ("nobody", "member list", EMPTY),
        ("nobody", "status", EMPTY),
        ("nobody", "alarm list", EMPTY),
        ("nobody", "alarm raise NOSPACE", EMPTY),
        ("nobody", "compact", EMPTY),
        ("alice", "lease grant", OK),
        ("alice", "lease revoke L", DENIED),
        ("alice", "keepalive L", DENIED),
        ("alice", "keepalive own", OK),
        ("alice", "lease list", DENIED),
        ("alice", "timetolive L keys", DENIED),
        ("alice", "timetolive L", OK),
        ("alice", "timetolive own keys", OK),
        ("alice", "member list", OK),
        ("alice", "status", OK),
        ("alice", "alarm list", OK),
        ("alice", "alarm raise NOSPACE", DENIED),
        ("alice", "compact", DENIED),
    ]
    .map(|(who, call, o)| format!("{who:6} {call:28} {o}"));
    assert_eq!(got.join("\n"), want.join("\n"));
    nothing_changed(&c).await;

    // The same calls through the JSON gateway.
    let alarm_raise =
        format!(r#"{{"action":"ACTIVATE","memberID":"{member_id}","alarm":"NOSPACE"}}"#);
    let calls: Vec<(&str, &str, String)> = vec![
        ("lease grant", "/v3/lease/grant", r#"{"TTL":60}"#.into()),
        (
            "lease revoke L",
            "/v3/lease/revoke",
            format!(r#"{{"ID":{L}}}"#),
        ),
        ("lease list", "/v3/lease/leases", "{}".into()),
        (
            "timetolive L keys",
            "/v3/lease/timetolive",
            format!(r#"{{"ID":{L},"keys":true}}"#),
        ),
        ("member list", "/v3/cluster/member/list", "{}".into()),
        ("status", "/v3/maintenance/status", "{}".into()),
        (
            "alarm list",
            "/v3/maintenance/alarm",
            r#"{"action":"GET"}"#.into(),
        ),
        ("alarm raise NOSPACE", "/v3/maintenance/alarm", alarm_raise),
        (
            "compact",
            "/v3/kv/compaction",
            format!(r#"{{"revision":{rev}}}"#),
        ),
    ];
    let mut got = Vec::new();
    for (name, token) in [("nobody", None), ("alice", Some(c.alice_token.as_str()))] {
        for (call, path, body) in &calls {
            let o = gw_outcome(gateway(&srv, path, body, token, None).await);
            got.push(format!("{name:6} {call:28} {o}"));
        }
        let keepalive = gateway(
            &srv,
            "/v3/lease/keepalive",
            &format!(r#"{{"ID":{L}}}"#),
            token,
            Some("\r\n0\r\n"),
        )
        .await;
        let refused = if name == "nobody" {
            "user name is empty"
        } else {
            "permission denied"
        };
        assert!(
            keepalive.1.contains(refused) && !keepalive.1.contains("\"TTL\""),
            "{name} keepalive L through the gateway: {keepalive:?}"
        );
    }
    const GW_EMPTY: &str = "400: etcdserver: user name is empty";
    const GW_DENIED: &str = "403: etcdserver: permission denied";
    let want = [
        ("nobody", "lease grant", GW_EMPTY),
        ("nobody", "lease revoke L", GW_EMPTY),
        ("nobody", "lease list", GW_EMPTY),
        ("nobody", "timetolive L keys", GW_EMPTY),
        ("nobody", "member list", GW_EMPTY),
        ("nobody", "status", GW_EMPTY),
        ("nobody", "alarm list", GW_EMPTY),
        ("nobody", "alarm raise NOSPACE", GW_EMPTY),
        ("nobody", "compact", GW_EMPTY),
        ("alice", "lease grant", OK),
        ("alice", "lease revoke L", GW_DENIED),
        ("alice", "lease list", GW_DENIED),
        ("alice", "timetolive L keys", GW_DENIED),
        ("alice", "member list", OK),
        ("alice", "status", OK),
        ("alice", "alarm list", OK),
        ("alice", "alarm raise NOSPACE", GW_DENIED),
        ("alice", "compact", GW_DENIED),
    ]
    .map(|(who, call, o)| format!("{who:6} {call:28} {o}"));
    assert_eq!(got.join("\n"), want.join("\n"));
    nothing_changed(&c).await;

    // Root may do all of it.
    let r = &c.root;
    assert_eq!(keep_alive(r, L).await, OK);
    r.lease()
        .lease_leases(r.req(LeaseLeasesRequest {}))
        .await
        .unwrap();
    let (status, body) = gateway(&srv, "/v3/lease/leases", "{}", Some(&c.root_token), None).await;
    assert_eq!(status, 200, "{body}");
    r.kv()
        .compact(r.req(CompactionRequest {
            revision: rev,
            physical: false,
        }))
        .await
        .unwrap();
}

/// GHSA-x35m-3gp4-4fh5 (CVE-2026-44283, etcd 3.4.44 / 3.5.30 / 3.6.11): a Put inside a Txn is
/// checked as a plain Put is — its previous value needs read permission, its lease needs write
/// permission on the keys the lease holds — at any depth of nesting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_inside_a_txn_is_judged_as_a_plain_put() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let c = cast(&srv).await;
    let op = |p: PutRequest| RequestOp {
        request: Some(request_op::Request::RequestPut(p)),
    };
    let txn = |ops: Vec<RequestOp>| TxnRequest {
        compare: vec![],
        success: ops,
        failure: vec![],
    };
    let nest = |t: TxnRequest| RequestOp {
        request: Some(request_op::Request::RequestTxn(t)),
    };
    let prev = |k: &str| PutRequest {
        prev_kv: true,
        ..put(k, b"new")
    };
    let leased = |k: &str, lease| PutRequest {
        lease,
        ..put(k, b"new")
    };
    let own = c
        .alice
        .lease()
        .lease_grant(c.alice.req(LeaseGrantRequest { ttl: 600, id: 0 }))
        .await
        .unwrap()
        .into_inner()
        .id;
    let cases: Vec<(&str, &As, TxnRequest, &str)> = vec![
        (
            "bob: put foo, prev_kv",
            &c.bob,
            txn(vec![op(prev("foo"))]),
            DENIED,
        ),
        (
            "bob: put foo, prev_kv, two txns deep",
            &c.bob,
            txn(vec![nest(txn(vec![nest(txn(vec![op(prev("foo"))]))]))]),
            DENIED,
        ),
        (
            "bob: put foo",
            &c.bob,
            txn(vec![op(put("foo", b"bob's"))]),
            OK,
        ),
        (
            "alice: put a/y on root's lease",
            &c.alice,
            txn(vec![op(leased("a/y", L))]),
            DENIED,
        ),
        (
            "alice: put a/y on root's lease, nested",
            &c.alice,
            txn(vec![nest(txn(vec![op(leased("a/y", L))]))]),
            DENIED,
        ),
        (
            "alice: put a/y on her own lease, nested",
            &c.alice,
            txn(vec![nest(txn(vec![op(leased("a/y", own))]))]),
            OK,
        ),
    ];
    for (name, who, t, want) in &cases {
        let got = outcome(who.kv().txn(who.req(t.clone())).await);
        assert_eq!(&got, want, "{name}");
    }
    // The plain Put is refused the same way.
    assert_eq!(
        outcome(c.bob.kv().put(c.bob.req(prev("foo"))).await),
        DENIED
    );
    // Through the gateway.
    let body = |key: &str, prev_kv: bool, lease: i64| {
        format!(
            r#"{{"success":[{{"requestTxn":{{"success":[{{"requestPut":{{"key":"{}","value":"{}","prev_kv":{prev_kv},"lease":"{lease}"}}}}]}}}}]}}"#,
            b64(key.as_bytes()),
            b64(b"gw")
        )
    };
    for (name, token, body, want) in [
        (
            "bob, prev_kv",
            &c.bob_token,
            body("foo", true, 0),
            "403: etcdserver: permission denied",
        ),
        (
            "alice, root's lease",
            &c.alice_token,
            body("a/z", false, L),
            "403: etcdserver: permission denied",
        ),
        (
            "alice, her lease",
            &c.alice_token,
            body("a/z", false, own),
            OK,
        ),
    ] {
        let got = gw_outcome(gateway(&srv, "/v3/kv/txn", &body, Some(token), None).await);
        assert_eq!(got, want, "gateway: {name}");
    }
    // Root's lease still holds its one key; foo holds what bob was allowed to write.
    let ttl = c
        .root
        .lease()
        .lease_time_to_live(c.root.req(LeaseTimeToLiveRequest { id: L, keys: true }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ttl.keys, vec![b"s/lease-secret".to_vec()]);
    let foo = c
        .root
        .kv()
        .range(c.root.req(RangeRequest {
            key: b"foo".to_vec(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(foo.kvs[0].value, b"bob's");
}

/// GHSA-xg4h-6gfc-h4m8 (etcd 3.5.33 / 3.6.14 / 3.7.1): a watch from a key to the end of the key
/// space (`range_end` "\0") is checked as that whole range, not as its first key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_to_the_end_of_the_key_space_needs_read_on_all_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let c = cast(&srv).await;
    let watch = |range_end: &[u8]| WatchRequest {
        request_union: Some(watch_request::RequestUnion::CreateRequest(
            WatchCreateRequest {
                key: b"w".to_vec(),
                range_end: range_end.to_vec(),
                ..Default::default()
            },
        )),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(watch(b"\0")).await.unwrap();
    tx.send(watch(b"")).await.unwrap();
    let mut stream = WatchClient::new(c.carol.channel.clone())
        .watch(c.carol.req(tokio_stream::wrappers::ReceiverStream::new(rx)))
        .await
        .unwrap()
        .into_inner();
    let next = async |s: &mut tonic::Streaming<WatchResponse>| {
        tokio::time::timeout(Duration::from_secs(10), s.message())
            .await
            .expect("watch answers")
            .unwrap()
            .unwrap()
    };
    let first = next(&mut stream).await;
    assert!(first.created && first.canceled, "{first:?}");
    assert_eq!(
        first.cancel_reason,
        "rpc error: code = PermissionDenied desc = etcdserver: permission denied"
    );
    let second = next(&mut stream).await;
    assert!(second.created && !second.canceled, "{second:?}");
    for k in ["w1", "x", "w"] {
        c.root.kv().put(c.root.req(put(k, b"v"))).await.unwrap();
    }
    let event = next(&mut stream).await;
    let keys: Vec<&[u8]> = event
        .events
        .iter()
        .map(|e| e.kv.as_ref().unwrap().key.as_slice())
        .collect();
    assert_eq!(keys, vec![b"w".as_slice()], "carol saw {event:?}");
    drop(tx);

    // The gateway's watch checks the same range.
    let body = format!(
        r#"{{"create_request":{{"key":"{}","range_end":"{}"}}}}"#,
        b64(b"w"),
        b64(b"\0")
    );
    let (status, out) = gateway(
        &srv,
        "/v3/watch",
        &body,
        Some(&c.carol_token),
        Some("permission denied"),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    assert!(
        out.contains(r#""canceled":true"#) && out.contains("permission denied"),
        "{out}"
    );
    // Root watches everything.
    let (_, out) = gateway(
        &srv,
        "/v3/watch",
        &body,
        Some(&c.root_token),
        Some("created"),
    )
    .await;
    assert!(!out.contains("canceled"), "{out}");
}

/// The quota step counts the puts of nested txns (etcd 3.5.33 / 3.6.14 / 3.7.1): with the
/// NOSPACE alarm raised, a 100 KiB put inside a txn inside a txn is refused and not written;
/// with a quota it would pass, it is refused before it is proposed, and raises the alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_nested_in_txns_is_charged_against_the_quota() {
    let big = || RequestOp {
        request: Some(request_op::Request::RequestTxn(TxnRequest {
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestTxn(TxnRequest {
                    success: vec![RequestOp {
                        request: Some(request_op::Request::RequestPut(put(
                            "big",
                            &vec![b'x'; 100 * 1024],
                        ))),
                    }],
                    ..Default::default()
                })),
            }],
            ..Default::default()
        })),
    };
    let txn = TxnRequest {
        success: vec![big()],
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let c = cast(&srv).await;
    let r = &c.root;
    let member_id = r
        .maintenance()
        .status(r.req(StatusRequest {}))
        .await
        .unwrap()
        .into_inner()
        .header
        .unwrap()
        .member_id;
    r.maintenance()
        .alarm(r.req(AlarmRequest {
            action: alarm_request::AlarmAction::Activate as i32,
            member_id,
            alarm: AlarmType::Nospace as i32,
        }))
        .await
        .unwrap();
    assert_eq!(outcome(r.kv().txn(r.req(txn.clone())).await), NOSPACE);
    let body = format!(
        r#"{{"success":[{{"requestTxn":{{"success":[{{"requestPut":{{"key":"{}","value":"{}"}}}}]}}}}]}}"#,
        b64(b"big"),
        b64(&vec![b'x'; 100 * 1024])
    );
    let got = gw_outcome(gateway(&srv, "/v3/kv/txn", &body, Some(&c.root_token), None).await);
    assert_eq!(got, "429: etcdserver: mvcc: database space exceeded");
    let got = r
        .kv()
        .range(r.req(RangeRequest {
            key: b"big".to_vec(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.count, 0, "the nested put was written");
    drop(c);
    drop(srv);

    // A quota the nested put would go past: refused before it is proposed, alarm raised.
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut probe = srv.client().await;
    let used = probe.status().await.unwrap().db_size() as u64;
    drop(srv);
    let dir = tempfile::tempdir().unwrap();
    let quota = (used + 50 * 1024).to_string();
    let srv = Server::start_with(dir.path(), &["--quota-backend-bytes", &quota]);
    let ch = channel(srv.port).await;
    let nobody = As {
        channel: ch,
        token: None,
    };
    assert_eq!(outcome(nobody.kv().txn(txn).await), NOSPACE);
    let alarms = nobody
        .maintenance()
        .alarm(AlarmRequest {
            action: alarm_request::AlarmAction::Get as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(alarms.alarms.len(), 1, "{alarms:?}");
    assert_eq!(alarms.alarms[0].alarm, AlarmType::Nospace as i32);
}

/// CVE-2020-15113 (GHSA-chh6-ppwq-jh92, etcd 3.4.10; a warning since 3.4.13): a member makes its
/// data directory and everything under it readable by its own user only (directories 0700,
/// files 0600), and reports a data directory that already exists with a wider permission.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_is_the_members_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let srv = Server::start(&data);
    let mut c = srv.client().await;
    c.put("k", "v", None).await.unwrap();
    let mut wide = Vec::new();
    let mut seen = 0;
    let mut dirs = vec![data.clone()];
    while let Some(dir) = dirs.pop() {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        if mode != 0o700 {
            wide.push(format!("{} {mode:o}", dir.display()));
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            seen += 1;
            if path.is_dir() {
                dirs.push(path);
            } else if std::fs::metadata(&path).unwrap().permissions().mode() & 0o077 != 0 {
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
                wide.push(format!("{} {mode:o}", path.display()));
            }
        }
    }
    assert!(seen >= 4, "the data directory holds only {seen} entries");
    assert!(wide.is_empty(), "readable by others: {wide:?}");
    drop(c);
    drop(srv);

    // An existing data directory of mode 0755 is reported, as etcd reports it, and kept.
    let existing = root.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = crate::actcd_command()
        .arg("--data-dir")
        .arg(&existing)
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{}", crate::free_port()),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{}", crate::free_port()),
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .find(|l| l.contains("check file permission") || l.contains("ready to serve"))
    });
    let line = tokio::time::timeout(Duration::from_secs(30), lines)
        .await
        .expect("the member logs")
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line = line.expect("a log line");
    assert!(
        line.contains("check file permission")
            && line.contains("drwxr-xr-x")
            && line.contains("-rwx------"),
        "{line}"
    );
    let mode = std::fs::metadata(&existing).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
}

/// Found by the hostile run's long profile: a `/v2/members` body with a number among its peer
/// URLs added a voting member (the number was dropped, the rest taken), and a one-member
/// cluster lost its quorum. Bodies etcd refuses are refused with etcd's (Go's) words and change
/// nothing. Also: `/health` stays healthy with v3 auth on (its anonymous probe is refused,
/// which etcd counts as the member answering).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_member_bodies_change_nothing_and_health_holds_with_auth_on() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start_with(dir.path(), &["--enable-v2"]);
    let mut c = srv.client().await;
    let addr = srv.endpoint();
    for (body, want) in [
        (
            r#"{"peerURLs":["http://127.0.0.1:1",1]}"#,
            "json: cannot unmarshal number into Go struct field .peerURLs of type string",
        ),
        (
            r#"{"peerURLs":[true]}"#,
            "json: cannot unmarshal bool into Go struct field .peerURLs of type string",
        ),
        (
            r#"{"peerURLs":"http://127.0.0.1:1"}"#,
            "json: cannot unmarshal string into Go struct field .peerURLs of type []string",
        ),
        (r#"{}"#, "no valid URLs given"),
        (r#"{"peerURLs":[]}"#, "no valid URLs given"),
    ] {
        let (status, out) = crate::http::request(&addr, "POST", "/v2/members", body, None).await;
        assert_eq!(status, 400, "{body}: {out}");
        assert!(out.contains(want), "{body}: {out}");
    }
    let members = c.member_list().await.unwrap();
    assert_eq!(members.members().len(), 1, "a member was added");
    c.put("still", "writable", None).await.unwrap();

    // /health with v3 auth on.
    c.user_add("root", "rootpw", None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.auth_enable().await.unwrap();
    let (status, out) = crate::http::get(&addr, "/health").await;
    assert_eq!(
        (status, out.as_str()),
        (200, r#"{"health":"true","reason":""}"#)
    );
}

/// GHSA-528j-9r78-wffx (etcd 3.4.10: credentials in clear in the WAL at each login) and
/// CVE-2021-28235 (3.5.8: a login's password in the log): passwords reach neither the log nor
/// any file of the data directory — a user added, its password changed, logins with right and
/// wrong passwords, over gRPC and the gateway; the member then killed so nothing is compacted
/// away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_reach_the_data_directory() {
    const FIRST: &str = "first-Pa55word-in-clear";
    const SECOND: &str = "second-Pa55word-in-clear";
    const WRONG: &str = "wrong-Pa55word-in-clear";
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    let mut c = srv.client().await;
    c.user_add("root", FIRST, None).await.unwrap();
    c.user_grant_role("root", "root").await.unwrap();
    c.user_add("alice", FIRST, None).await.unwrap();
    c.user_change_password("alice", SECOND).await.unwrap();
    c.auth_enable().await.unwrap();
    let ch = channel(srv.port).await;
    for (name, pw) in [("root", FIRST), ("alice", SECOND), ("alice", WRONG)] {
        let _ = actcd_proto::etcdserverpb::auth_client::AuthClient::new(ch.clone())
            .authenticate(AuthenticateRequest {
                name: name.into(),
                password: pw.into(),
            })
            .await;
        let body = format!(r#"{{"name":"{name}","password":"{pw}"}}"#);
        let _ = gateway(&srv, "/v3/auth/authenticate", &body, None, None).await;
    }
    srv.kill();
    let mut files = vec![dir.path().to_path_buf()];
    let mut read = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        read += bytes.len();
        for pw in [FIRST, SECOND, WRONG] {
            assert!(
                !bytes.windows(pw.len()).any(|w| w == pw.as_bytes()),
                "{pw} in {}",
                p.display()
            );
        }
    }
    assert!(read > 0);
}

/// GHSA-pm3m-32r3-7mfh (etcd 3.3.23 / 3.4.10): a negative `--auto-compaction-retention` made
/// etcd's compactor loop; actcd refuses to start with one, in either mode.
#[test]
fn a_negative_compaction_retention_stops_the_start() {
    for mode in ["periodic", "revision"] {
        let dir = tempfile::tempdir().unwrap();
        let out = crate::actcd_command()
            .args([
                "--auto-compaction-mode",
                mode,
                "--auto-compaction-retention=-1",
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{mode}: started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("invalid auto-compaction-retention \"-1\""),
            "{mode}: {err}"
        );
    }
}

/// etcd #21993 (3.5.32: an unparsable JWT written whole into a warning), #20943 (3.5.26: log
/// lines carrying tokens) and CVE-2021-28235 (3.5.8: a login's password in the debug log): with
/// `--log-level debug`, a member that hands out tokens, is sent them back, a forged JWT, a
/// wrong password and a right one, never writes a token or a password to its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_passwords_stay_out_of_the_log() {
    const PASSWORD: &str = "Pa55word-that-must-not-be-logged";
    const FORGED: &str = "eyJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6InJvb3QifQ.Zm9yZ2VkLXNpZ25hdHVyZQ";
    let dir = tempfile::tempdir().unwrap();
    let port = crate::free_port();
    let mut child = crate::actcd_command()
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--listen-client-urls",
            &format!("http://127.0.0.1:{port}"),
            "--advertise-client-urls",
            &format!("http://127.0.0.1:{port}"),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{}", crate::free_port()),
            "--log-level",
            "debug",
        ])
        .env_remove("RUST_LOG")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ch = channel(port).await;
    let nobody = As {
        channel: ch.clone(),
        token: None,
    };
    let mut a = nobody.auth();
    a.user_add(AuthUserAddRequest {
        name: "root".into(),
        password: PASSWORD.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    a.user_grant_role(AuthUserGrantRoleRequest {
        user: "root".into(),
        role: "root".into(),
    })
    .await
    .unwrap();
    a.auth_enable(AuthEnableRequest {}).await.unwrap();
    let mut tokens = Vec::new();
    for pw in [PASSWORD, "wrong-Pa55word-not-logged"] {
        if let Ok(r) = a
            .authenticate(AuthenticateRequest {
                name: "root".into(),
                password: pw.into(),
            })
            .await
        {
            tokens.push(r.into_inner().token);
        }
    }
    assert_eq!(tokens.len(), 1);
    for token in [tokens[0].as_str(), FORGED, "simple.token.99"] {
        let who = As {
            channel: ch.clone(),
            token: Some(token.into()),
        };
        let _ = who
            .kv()
            .range(who.req(RangeRequest {
                key: b"k".to_vec(),
                ..Default::default()
            }))
            .await;
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(log.contains("DEBUG"), "no debug log to check: {log}");
    let token = &tokens[0];
    for secret in [PASSWORD, "wrong-Pa55word-not-logged", token, FORGED] {
        assert!(!log.contains(secret), "{secret} in the log");
    }
}
