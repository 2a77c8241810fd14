//! The auth store alone, as the applier and the front call it:
//! - `auth/check`: checks against the view the auth actor publishes (`SharedView`, what the
//!   applier and the front hold) for a user holding 10,000 grants spread over 100 roles (single
//!   keys, ranges and prefixes, merged per user into disjoint spans): a single key that is
//!   granted, one that is not, and a range; and `check_request` for a txn with a compare and two
//!   ops (what every write with auth on pays at apply).
//! - `auth/actor`: the auth actor through its messages: `ApplyAuth` of an AuthStatus entry (the
//!   applier's hop for every auth entry) and `CheckPassword` at cost 10 (Authenticate's check,
//!   bcrypt on the actor's blocking pool).
//! - `auth/tokens`: resolving a token on every request: simple (a hash lookup that restarts the
//!   TTL) and JWT HS256 (a signature check).
//! - `auth/bcrypt`: one password check at cost 10, the price of every Authenticate (run off the
//!   actor threads, on the blocking pool).
//!
//! Run: `cargo bench --bench auth` (`-- --test` runs each once).

mod common;

use std::hint::black_box;
use std::time::Duration;

use std::sync::Arc;

use actcd_auth::{AuthActor, AuthRequest, AuthStore};
use actcd_authz::TokenProvider;
use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::authpb::{Permission, permission::Type};
use actcd_proto::etcdserverpb::*;
use actcd_types::AuthInfo;
use actcd_types::auth::Perm;
use actcd_types::msg::{ApplyAuth, CheckPassword};
use actcd_types::storage::{KvEngine, MemEngine};
use actix::{Actor, System};
use criterion::{Criterion, criterion_group, criterion_main};

const GRANTS: usize = 10_000;
const ROLES: usize = 100;

/// An engine holding root, `alice` (password `password`, cost 10), and `user` holding GRANTS
/// grants over ROLES roles; auth enabled.
fn engine() -> (Arc<MemEngine>, AuthInfo) {
    let engine = Arc::new(MemEngine::new());
    let mut txn = engine.write().expect("mem txn");
    let mut s = AuthStore::open(&*txn).expect("open");
    let root = AuthInfo::default();
    let mut apply = |s: &mut AuthStore, r: AuthRequest| {
        s.apply(&mut *txn, &root, r)
            .expect("engine")
            .expect("accepted");
    };
    for name in ["root", "user"] {
        apply(
            &mut s,
            AuthRequest::UserAdd(AuthUserAddRequest {
                name: name.into(),
                options: Some(actcd_proto::authpb::UserAddOptions { no_password: true }),
                ..Default::default()
            }),
        );
    }
    apply(
        &mut s,
        AuthRequest::UserGrantRole(AuthUserGrantRoleRequest {
            user: "root".into(),
            role: "root".into(),
        }),
    );
    for r in 0..ROLES {
        let role = format!("role{r:03}").into_bytes();
        apply(
            &mut s,
            AuthRequest::RoleAdd(AuthRoleAddRequest { name: role.clone() }),
        );
        for g in 0..GRANTS / ROLES {
            let i = r * (GRANTS / ROLES) + g;
            let key = format!("k/{i:06}");
            let (kind, range_end) = match i % 3 {
                0 => (Type::Read, Vec::new()),
                1 => (Type::Readwrite, format!("k/{i:06}/z").into_bytes()),
                _ => (Type::Write, format!("k/{i:06}0").into_bytes()),
            };
            apply(
                &mut s,
                AuthRequest::RoleGrantPermission(AuthRoleGrantPermissionRequest {
                    name: role.clone(),
                    perm: Some(Permission {
                        perm_type: kind as i32,
                        key: key.into_bytes(),
                        range_end,
                    }),
                }),
            );
        }
        apply(
            &mut s,
            AuthRequest::UserGrantRole(AuthUserGrantRoleRequest {
                user: "user".into(),
                role,
            }),
        );
    }
    let hash = actcd_auth::hash_password("password", 10).expect("hash");
    apply(
        &mut s,
        AuthRequest::UserAdd(AuthUserAddRequest {
            name: "alice".into(),
            hashed_password: {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(hash)
            },
            ..Default::default()
        }),
    );
    apply(&mut s, AuthRequest::Enable);
    let who = AuthInfo {
        username: "user".into(),
        revision: s.revision(),
    };
    txn.commit().expect("commit");
    (engine, who)
}

fn bench_auth(c: &mut Criterion) {
    let (engine, who) = engine();
    let tokens = actcd_authz::TokenProvider::Simple(actcd_authz::SimpleTokens::new(
        std::time::Duration::from_secs(300),
    ));
    let actor = AuthActor::open(engine, actcd_auth::DEFAULT_COST, tokens).expect("auth store");
    let s = actor.view();
    let mut g = c.benchmark_group("auth/check");
    g.bench_function("key_granted_10k_grants", |b| {
        b.iter(|| s.check_range(&who, black_box(b"k/004242"), b"", Perm::Read))
    });
    assert!(s.check_range(&who, b"k/004242", b"", Perm::Read).is_ok());
    g.bench_function("key_refused_10k_grants", |b| {
        b.iter(|| s.check_range(&who, black_box(b"x/1"), b"", Perm::Read))
    });
    g.bench_function("range_10k_grants", |b| {
        b.iter(|| s.check_range(&who, black_box(b"k/004243/a"), b"k/004243/b", Perm::Read))
    });
    let txn = InternalRaftRequest {
        txn: Some(TxnRequest {
            compare: vec![Compare {
                key: b"k/004243/c".to_vec(),
                ..Default::default()
            }],
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: b"k/004244".to_vec(),
                    ..Default::default()
                })),
            }],
            failure: vec![RequestOp {
                request: Some(request_op::Request::RequestRange(RangeRequest {
                    key: b"k/004242".to_vec(),
                    ..Default::default()
                })),
            }],
        }),
        ..Default::default()
    };
    assert!(s.check_request(&who, &txn, &|_| Vec::new()).is_ok());
    g.bench_function("txn_request_10k_grants", |b| {
        b.iter(|| s.check_request(&who, black_box(&txn), &|_| Vec::new()))
    });
    g.finish();

    let sys = System::new();
    let addr = sys.block_on(async { actor.start() });
    let mut g = c.benchmark_group("auth/actor");
    let status = || ApplyAuth {
        request: InternalRaftRequest {
            auth_status: Some(AuthStatusRequest {}),
            ..Default::default()
        },
        who: AuthInfo {
            username: "root".into(),
            revision: who.revision,
        },
    };
    g.bench_function("apply_auth_status", |b| {
        b.iter(|| {
            let applied = sys.block_on(addr.send(status())).expect("mailbox");
            assert!(applied.expect("applied").result.is_ok());
        })
    });
    g.sample_size(10);
    let login = || CheckPassword {
        name: "alice".into(),
        password: "password".into(),
    };
    g.bench_function("check_password_cost_10", |b| {
        b.iter(|| {
            let checked = sys.block_on(addr.send(login())).expect("mailbox");
            assert!(checked.is_ok());
        })
    });
    g.finish();

    let mut g = c.benchmark_group("auth/tokens");
    let mut simple = TokenProvider::parse("simple", Duration::from_secs(300)).expect("simple");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    // A login as it applies: the auth actor drafts the token, registers it, publishes the book
    // the front identifies callers by; the bench checks a token against that book.
    let token = simple.draft();
    simple.register(b"user", 1, &token, tokio::time::Instant::now());
    let book = simple.publish();
    g.bench_function("simple_info", |b| {
        b.iter(|| book.info(black_box(&token), 1))
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("hs.key");
    std::fs::write(&key, b"bench secret bench secret").expect("key");
    let jwt = TokenProvider::parse(
        &format!("jwt,priv-key={},sign-method=HS256", key.display()),
        Duration::from_secs(300),
    )
    .expect("jwt");
    let token = jwt
        .signer()
        .expect("a jwt signer")
        .sign(b"user", 1)
        .expect("sign");
    let book = jwt.publish();
    g.bench_function("jwt_hs256_info", |b| {
        b.iter(|| book.info(black_box(&token), 1))
    });
    g.finish();

    let mut g = c.benchmark_group("auth/bcrypt");
    g.sample_size(10);
    let hash = actcd_auth::hash_password("password", 10).expect("hash");
    g.bench_function("verify_cost_10", |b| {
        b.iter(|| actcd_auth::verify_password(black_box("password"), hash.as_bytes()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_auth
}
criterion_main!(benches);
