//! [`AuthActor`]: the auth store's room. Thin glue: each message is one call on [`AuthStore`]
//! or one bcrypt job on the blocking pool.

use std::sync::Arc;

use actcd_authz::TokenProvider;
use actcd_types::EtcdError;
use actcd_types::auth::{SharedTokens, SharedView};
use actcd_types::msg::{
    ApplyAuth, AuthApplied, AuthEvent, AuthReply, CheckPassword, ConnectAuth, DraftToken,
    HashPassword, ReloadAuth, SignToken, TokenUsed,
};
use actcd_types::storage::ReadEngine;
use actix::prelude::*;
use base64::Engine as _;
use tokio::sync::mpsc::UnboundedSender;

use crate::oplog::OpLog;
use crate::store::{AuthRequest, AuthStore};

pub struct AuthActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: Arc<actcd_types::meter::Meter>,
    store: AuthStore,
    /// The committed tables, read at start and again after a snapshot is installed.
    engine: Arc<dyn ReadEngine>,
    /// `--bcrypt-cost`, for the hashes of new passwords.
    bcrypt_cost: u32,
    /// The view last published.
    view: SharedView,
    /// `--auth-token`: simple tokens (drafted, registered as logins apply, ended) or JWTs.
    tokens: TokenProvider,
    /// The token book last published.
    book: SharedTokens,
    /// The front (`ConnectAuth`).
    events: Option<UnboundedSender<AuthEvent>>,
}

impl AuthActor {
    /// Loads the auth tables from a read transaction on `engine`; `tokens` is the provider
    /// `--auth-token` chose.
    pub fn open(
        engine: Arc<dyn ReadEngine>,
        bcrypt_cost: u32,
        mut tokens: TokenProvider,
    ) -> Result<Self, EtcdError> {
        let store = {
            let txn = engine.begin_read().map_err(EtcdError::internal)?;
            AuthStore::open(&*txn).map_err(EtcdError::internal)?
        };
        let view = store.publish();
        tokens.set_enabled(store.is_enabled());
        let book = tokens.publish();
        Ok(Self {
            meter: actcd_types::meter::Meter::new(),
            store,
            engine,
            bcrypt_cost,
            view,
            tokens,
            book,
            events: None,
        })
    }

    /// The view published now (what the applier starts judging by).
    pub fn view(&self) -> SharedView {
        self.view.clone()
    }

    /// Starts the actor on an `Arbiter` thread of its own. Must be called inside a running
    /// actix System.
    pub fn start_on_own_thread(self) -> Addr<Self> {
        let arbiter = Arbiter::new();
        AuthActor::start_in_arbiter(&arbiter.handle(), move |_| self)
    }

    /// Tells the front the newest token book, view and state.
    fn announce(&self) {
        let Some(tx) = &self.events else {
            return;
        };
        let _ = tx.send(AuthEvent::Tokens(self.book.clone()));
        let _ = tx.send(AuthEvent::View(self.view.clone()));
        let _ = tx.send(AuthEvent::State {
            enabled: self.store.is_enabled(),
            revision: self.store.revision(),
        });
    }

    /// Applies one auth request; the front hears of it before the answer goes back.
    fn apply(&mut self, mut msg: ApplyAuth) -> Result<AuthApplied, EtcdError> {
        let Some(req) = AuthRequest::take(&mut msg.request) else {
            return Err(EtcdError::internal("auth: not an auth request"));
        };
        let invalidates = req.invalidated_user();
        let simple_token = match &req {
            AuthRequest::Authenticate { simple_token, .. } => simple_token.clone(),
            _ => String::new(),
        };
        let before = (self.store.is_enabled(), self.store.revision());
        let mut log = OpLog::default();
        let result = self
            .store
            .apply(&mut log, &msg.who, req)
            .map_err(EtcdError::internal)?;
        if before != (self.store.is_enabled(), self.store.revision()) {
            self.view = self.store.publish();
        }
        if let Ok(reply) = &result {
            let revision = self.store.revision();
            let mut changed = self.tokens.set_enabled(self.store.is_enabled());
            if let Some(user) = invalidates {
                changed |= self.tokens.invalidate_user(&user, revision);
            }
            if let AuthReply::Authenticate { username, revision } = reply
                && !simple_token.is_empty()
            {
                let now = tokio::time::Instant::now();
                self.tokens
                    .register(username, *revision, &simple_token, now);
                changed = true;
            }
            if changed {
                self.book = self.tokens.publish();
            }
        }
        self.announce();
        Ok(AuthApplied {
            result,
            view: self.view.clone(),
            ops: log.into_ops(),
        })
    }
}

impl Actor for AuthActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.set_mailbox_capacity(4096);
        // etcd's TTL keeper looks for unused simple tokens once a second.
        ctx.run_interval(std::time::Duration::from_secs(1), |a, _| {
            if a.tokens.expire(tokio::time::Instant::now()) {
                a.book = a.tokens.publish();
                a.announce();
            }
        });
    }
}

/// One committed auth request, in log order (from the applier).
impl Handler<ApplyAuth> for AuthActor {
    type Result = Result<AuthApplied, EtcdError>;

    fn handle(&mut self, msg: ApplyAuth, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ApplyAuth");
        self.apply(msg)
    }
}

/// The tables were replaced by a snapshot: read them again.
impl Handler<ReloadAuth> for AuthActor {
    type Result = Result<SharedView, EtcdError>;

    fn handle(&mut self, _: ReloadAuth, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("ReloadAuth");
        self.store = {
            let txn = self.engine.begin_read().map_err(EtcdError::internal)?;
            AuthStore::open(&*txn).map_err(EtcdError::internal)?
        };
        self.view = self.store.publish();
        if self.tokens.set_enabled(self.store.is_enabled()) {
            self.book = self.tokens.publish();
        }
        self.announce();
        Ok(self.view.clone())
    }
}

/// Authenticate's password check, against the hash as applied here, on the blocking pool.
impl Handler<CheckPassword> for AuthActor {
    type Result = ResponseFuture<Result<u64, EtcdError>>;

    fn handle(&mut self, msg: CheckPassword, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("CheckPassword");
        let found = self.store.password_of(&msg.name);
        Box::pin(async move {
            let (hash, revision) = found?;
            let ok = tokio::task::spawn_blocking(move || {
                crate::password::verify_password(&msg.password, &hash)
            })
            .await
            .map_err(EtcdError::internal)?;
            if ok {
                Ok(revision)
            } else {
                Err(EtcdError::AuthFailed)
            }
        })
    }
}

/// A new password's hash, on the blocking pool, base64-encoded as etcd proposes it.
impl Handler<HashPassword> for AuthActor {
    type Result = ResponseFuture<Result<String, EtcdError>>;

    fn handle(&mut self, msg: HashPassword, _: &mut Self::Context) -> Self::Result {
        let cost = self.bcrypt_cost;
        Box::pin(async move {
            let hashed = tokio::task::spawn_blocking(move || {
                crate::password::hash_password(&msg.password, cost)
            })
            .await
            .map_err(EtcdError::internal)??;
            Ok(base64::engine::general_purpose::STANDARD.encode(hashed))
        })
    }
}

/// The front: it hears the current token book, view and state at once, then every change.
impl Handler<ConnectAuth> for AuthActor {
    type Result = ();

    fn handle(&mut self, msg: ConnectAuth, _: &mut Self::Context) {
        self.events = Some(msg.events);
        self.announce();
    }
}

/// A simple token for a login about to be proposed (empty with JWTs).
impl Handler<DraftToken> for AuthActor {
    type Result = String;

    fn handle(&mut self, _: DraftToken, _: &mut Self::Context) -> String {
        self.tokens.draft()
    }
}

/// A JWT for a login that applied, signed on the blocking pool (RS256 takes milliseconds).
impl Handler<SignToken> for AuthActor {
    type Result = ResponseFuture<Result<Option<String>, EtcdError>>;

    fn handle(&mut self, msg: SignToken, _: &mut Self::Context) -> Self::Result {
        let signer = self.tokens.signer();
        Box::pin(async move {
            let Some(signer) = signer else {
                return Ok(None);
            };
            tokio::task::spawn_blocking(move || signer.sign(&msg.username, msg.revision))
                .await
                .map_err(EtcdError::internal)?
                .map(Some)
        })
    }
}

/// A simple token identified a caller: it lives a TTL from now.
impl Handler<TokenUsed> for AuthActor {
    type Result = ();

    fn handle(&mut self, msg: TokenUsed, _: &mut Self::Context) {
        self.tokens.touch(&msg.token, tokio::time::Instant::now());
    }
}

impl AuthActor {
    /// The auth store's revision (etcd's `etcd_debugging_auth_revision`).
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        vec![actcd_types::meter::Sample::value(
            "etcd_debugging_auth_revision",
            self.store.revision() as f64,
        )]
    }
}

actcd_types::impl_mailbox_probe!(AuthActor, meter, samples);

#[cfg(test)]
mod tests {
    use actcd_proto::actcdpb::InternalRaftRequest;
    use actcd_proto::etcdserverpb::{
        AuthUserAddRequest, AuthUserChangePasswordRequest, AuthUserGrantRoleRequest,
    };
    use actcd_types::AuthInfo;
    use actcd_types::storage::{KvEngine, MemEngine, Table, write_ops};

    use super::*;

    fn as_root(request: InternalRaftRequest) -> ApplyAuth {
        ApplyAuth {
            request,
            who: AuthInfo {
                username: "root".into(),
                revision: 100,
            },
        }
    }

    fn simple_tokens() -> TokenProvider {
        TokenProvider::parse("simple", std::time::Duration::from_secs(300)).unwrap()
    }

    /// Through its messages: writes come back as ops (nothing is written by the actor), the
    /// front hears the new view before the answer, and a reload reads what the ops became
    /// once committed.
    #[actix_rt::test]
    async fn applies_record_ops_and_tell_the_front_first() {
        let engine = Arc::new(MemEngine::new());
        let actor = AuthActor::open(engine.clone(), 4, simple_tokens()).unwrap();
        assert!(!actor.view().enabled());
        let addr = actor.start();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        addr.send(ConnectAuth { events: tx }).await.unwrap();
        let hashed = addr
            .send(HashPassword {
                password: "pw".into(),
            })
            .await
            .unwrap()
            .unwrap();
        let add = addr
            .send(as_root(InternalRaftRequest {
                auth_user_add: Some(AuthUserAddRequest {
                    name: "root".into(),
                    hashed_password: hashed.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .await
            .unwrap()
            .unwrap();
        assert!(add.result.is_ok());
        assert_eq!(add.view.revision(), 2);
        assert!(
            add.ops
                .iter()
                .any(|op| matches!(op, actcd_types::storage::Op::Put { table: Table::AuthUsers, key, .. } if key == b"root")),
            "{:?}",
            add.ops
        );
        assert_eq!(
            engine
                .read()
                .unwrap()
                .get(Table::AuthUsers, b"root")
                .unwrap(),
            None,
            "the actor writes nothing itself"
        );
        let grant = addr
            .send(as_root(InternalRaftRequest {
                auth_user_grant_role: Some(AuthUserGrantRoleRequest {
                    user: "root".into(),
                    role: "root".into(),
                }),
                ..Default::default()
            }))
            .await
            .unwrap()
            .unwrap();
        let change = addr
            .send(as_root(InternalRaftRequest {
                auth_user_change_password: Some(AuthUserChangePasswordRequest {
                    name: "root".into(),
                    hashed_password: hashed,
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .await
            .unwrap()
            .unwrap();
        assert!(change.result.is_ok());
        let mut heard = Vec::new();
        while let Ok(ev) = rx.try_recv() {
            heard.push(ev);
        }
        assert!(
            heard
                .iter()
                .any(|e| matches!(e, AuthEvent::View(v) if v.revision() == 4)),
            "{heard:?}"
        );
        // Auth is off: no password check answers.
        let login = CheckPassword {
            name: "root".into(),
            password: "pw".into(),
        };
        assert_eq!(
            addr.send(login).await.unwrap(),
            Err(EtcdError::AuthNotEnabled)
        );
        // Once the ops are committed (the MVCC store's job), a reload reads them back.
        let mut txn = engine.write().unwrap();
        let ops: Vec<_> = [add.ops, grant.ops, change.ops].concat();
        write_ops(&mut *txn, &ops, None).unwrap();
        txn.commit().unwrap();
        let view = addr.send(ReloadAuth).await.unwrap().unwrap();
        assert_eq!(view.revision(), 4);
        assert_eq!(
            view.check_admin(&AuthInfo {
                username: "root".into(),
                revision: 4
            }),
            Ok(())
        );
    }

    /// The newest token book the front heard of.
    fn newest_book(rx: &mut tokio::sync::mpsc::UnboundedReceiver<AuthEvent>) -> SharedTokens {
        let mut book = None;
        while let Ok(ev) = rx.try_recv() {
            if let AuthEvent::Tokens(b) = ev {
                book = Some(b);
            }
        }
        book.expect("a token book was announced")
    }

    /// The token provider is the actor's: a drafted simple token works once its login
    /// applies (the front hears the book before the answer), ends at a password change
    /// applied after it, and expires a TTL after its last use.
    #[actix_rt::test]
    async fn simple_tokens_live_from_login_to_password_change_or_ttl() {
        let engine = Arc::new(MemEngine::new());
        let addr = AuthActor::open(engine, 4, simple_tokens()).unwrap().start();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        addr.send(ConnectAuth { events: tx }).await.unwrap();
        let hashed = addr
            .send(HashPassword {
                password: "pw".into(),
            })
            .await
            .unwrap()
            .unwrap();
        let apply = |request: InternalRaftRequest| {
            let addr = addr.clone();
            async move { addr.send(as_root(request)).await.unwrap().unwrap().result }
        };
        let setup = [
            InternalRaftRequest {
                auth_user_add: Some(AuthUserAddRequest {
                    name: "root".into(),
                    hashed_password: hashed.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            InternalRaftRequest {
                auth_user_grant_role: Some(AuthUserGrantRoleRequest {
                    user: "root".into(),
                    role: "root".into(),
                }),
                ..Default::default()
            },
            InternalRaftRequest {
                auth_enable: Some(Default::default()),
                ..Default::default()
            },
        ];
        for r in setup {
            assert!(apply(r).await.is_ok());
        }
        let login = |token: String| InternalRaftRequest {
            authenticate: Some(actcd_proto::actcdpb::InternalAuthenticateRequest {
                name: "root".into(),
                password: Vec::new(),
                simple_token: token,
            }),
            ..Default::default()
        };
        let first = addr.send(DraftToken).await.unwrap();
        assert_eq!(
            addr.send(SignToken {
                username: "root".into(),
                revision: 1
            })
            .await
            .unwrap(),
            Ok(None),
            "simple tokens are not signed"
        );
        assert!(newest_book(&mut rx).info(&first, 3).is_none());
        assert!(apply(login(first.clone())).await.is_ok());
        let book = newest_book(&mut rx);
        assert_eq!(
            book.info(&first, 3).map(|i| i.username),
            Some("root".into())
        );

        // A password change ends the tokens of earlier logins, not of later ones.
        assert!(
            apply(InternalRaftRequest {
                auth_user_change_password: Some(AuthUserChangePasswordRequest {
                    name: "root".into(),
                    hashed_password: hashed,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .is_ok()
        );
        let second = addr.send(DraftToken).await.unwrap();
        assert!(apply(login(second.clone())).await.is_ok());
        let book = newest_book(&mut rx);
        assert!(
            book.info(&first, 4).is_none(),
            "ended by the password change"
        );
        assert!(book.info(&second, 4).is_some(), "the new password's login");

        // Unused for a TTL: gone at the next one-second sweep. Used: kept.
        tokio::time::pause();
        tokio::time::advance(std::time::Duration::from_secs(200)).await;
        addr.send(TokenUsed {
            token: second.clone(),
        })
        .await
        .unwrap();
        tokio::time::advance(std::time::Duration::from_secs(200)).await;
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "nothing expired yet");
        tokio::time::advance(std::time::Duration::from_secs(102)).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(newest_book(&mut rx).info(&second, 4).is_none(), "expired");
    }
}
