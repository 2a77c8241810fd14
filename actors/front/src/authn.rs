//! Who is calling: the authenticator chain, and the front's view of the auth state.
//!
//! Each authenticator looks at a request's credentials and answers "this is user X", "not
//! mine" (no credential of its kind) or "rejected" (a credential of its kind that is no good).
//! The chain asks them in order and the first definite answer wins; if none claims the
//! request, it runs as nobody (the empty user, which the auth store refuses wherever auth
//! matters). Every answer is counted and timed per authenticator for the metrics endpoint.
//!
//! The order is etcd's: a `token` in the gRPC metadata, then the common name of a verified
//! client certificate (only with `--client-cert-auth`), then, for the JSON gateway, HTTP Basic
//! credentials. The gateway passes `Authorization: <token>` and `Authorization: Bearer <token>`
//! on as the token; for `Authorization: Basic`, it checks the password against the store's
//! hash first (bcrypt is slow, so it runs on the blocking pool and good answers are
//! remembered per user, password digest and auth revision, [`BasicCache`]) and hands the chain
//! the outcome ([`BasicOutcome`]), which the `basic` authenticator turns into a verdict.
//!
//! With auth disabled nobody is authenticated: every request runs as the empty user and a
//! token, even a bad one, is ignored, as etcd does.
//!
//! The enabled flag, the auth revision, the newest permission view and the newest token book
//! are the auth store's, learned from the `AuthEvent`s it sends after applying auth changes
//! (the token provider is the auth actor's; a simple token that identifies a caller is
//! reported back with `TokenUsed`, which restarts its TTL). The store queues them
//! before the applier answers the change, and the gate reads its queue before every decision,
//! so a client that saw an auth change acknowledged is never judged by the state before it.
//! Reads, watch creates and admin calls are judged here by that view; writes are judged again
//! by the applier against the view at their point of the log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use actcd_authz::{AuthView, TokenBook};
use actcd_types::auth::{SharedTokens, SharedView};
use actcd_types::msg::{AuthEvent, TokenUsed};
use actcd_types::{AuthInfo, EtcdError};
use actix::Recipient;
use tokio::sync::mpsc::UnboundedReceiver;

/// What one authenticator makes of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    User(AuthInfo),
    NotMine,
    Rejected(EtcdError),
}

/// The credentials a request carries.
#[derive(Debug, Default, Clone)]
pub struct Credentials {
    /// gRPC metadata `token`.
    pub token: Option<String>,
    /// The common name of the client certificate the TLS layer verified.
    pub cert_cn: Option<String>,
    /// HTTP Basic credentials, already checked by the gateway.
    pub basic: Option<BasicOutcome>,
}

/// What checking an HTTP Basic user and password gave: the user (at the auth revision whose
/// hash was checked) or the refusal. Rides on the request as an extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicOutcome(pub Result<AuthInfo, EtcdError>);

/// Passwords already checked: (user, SHA-256 of the password) → the auth revision at which
/// the password matched. A change of password (or any auth change) moves the revision, so an
/// entry only answers for the revision it was made at. Bounded; cleared when full.
#[derive(Debug, Default)]
pub struct BasicCache {
    entries: std::sync::Mutex<std::collections::HashMap<(String, [u8; 32]), u64>>,
}

impl BasicCache {
    const MAX_ENTRIES: usize = 1024;

    fn digest(password: &str) -> [u8; 32] {
        let d = ring::digest::digest(&ring::digest::SHA256, password.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        out
    }

    /// Whether this password matched at `revision`.
    pub fn matched(&self, user: &str, password: &str, revision: u64) -> bool {
        let key = (user.to_string(), Self::digest(password));
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(&key) == Some(&revision)
    }

    pub fn remember(&self, user: &str, password: &str, revision: u64) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= Self::MAX_ENTRIES {
            entries.clear();
        }
        entries.insert((user.to_string(), Self::digest(password)), revision);
    }
}

/// HTTP Basic credentials the gateway checked.
pub struct BasicAuthenticator;

impl Authenticator for BasicAuthenticator {
    fn name(&self) -> &'static str {
        "basic"
    }

    fn authenticate(&self, creds: &Credentials, _: u64) -> Verdict {
        match &creds.basic {
            None => Verdict::NotMine,
            Some(BasicOutcome(Ok(info))) => Verdict::User(info.clone()),
            Some(BasicOutcome(Err(e))) => Verdict::Rejected(e.clone()),
        }
    }
}

/// One link of the chain.
pub trait Authenticator: Send + Sync {
    /// A short name for metrics (`token`, `client_cert`, …).
    fn name(&self) -> &'static str;
    /// `revision` is the auth revision as the front last heard it.
    fn authenticate(&self, creds: &Credentials, revision: u64) -> Verdict;
}

/// The newest token book the gate heard of, and where uses of simple tokens are reported.
#[derive(Debug)]
pub struct Tokens {
    book: RwLock<SharedTokens>,
    used: OnceLock<Recipient<TokenUsed>>,
}

impl Default for Tokens {
    fn default() -> Self {
        Self {
            book: RwLock::new(TokenBook::empty()),
            used: OnceLock::new(),
        }
    }
}

impl Tokens {
    pub fn book(&self) -> SharedTokens {
        self.book.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, book: SharedTokens) {
        *self.book.write().unwrap_or_else(|p| p.into_inner()) = book;
    }
}

/// A `token` from Authenticate: simple or JWT, as `--auth-token` chose.
pub struct TokenAuthenticator {
    pub tokens: Arc<Tokens>,
}

impl Authenticator for TokenAuthenticator {
    fn name(&self) -> &'static str {
        "token"
    }

    fn authenticate(&self, creds: &Credentials, revision: u64) -> Verdict {
        let Some(token) = creds.token.as_deref() else {
            return Verdict::NotMine;
        };
        let book = self.tokens.book();
        match book.info(token, revision) {
            Some(info) => {
                if book.is_simple()
                    && let Some(used) = self.tokens.used.get()
                {
                    used.do_send(TokenUsed {
                        token: token.to_string(),
                    });
                }
                Verdict::User(info)
            }
            None => Verdict::Rejected(EtcdError::InvalidAuthToken),
        }
    }
}

/// `--client-cert-auth`: the verified certificate's common name is the user. Its revision is
/// the current one, as etcd gives it.
pub struct ClientCertAuthenticator;

impl Authenticator for ClientCertAuthenticator {
    fn name(&self) -> &'static str {
        "client_cert"
    }

    fn authenticate(&self, creds: &Credentials, revision: u64) -> Verdict {
        match creds.cert_cn.as_deref() {
            Some(cn) if !cn.is_empty() => Verdict::User(AuthInfo {
                username: cn.as_bytes().to_vec(),
                revision,
            }),
            _ => Verdict::NotMine,
        }
    }
}

/// Counts and total time of one authenticator's answers.
#[derive(Debug, Default)]
pub struct AuthnStats {
    pub users: AtomicU64,
    pub not_mine: AtomicU64,
    pub rejected: AtomicU64,
    pub nanos: AtomicU64,
}

/// A snapshot of [`AuthnStats`] for one authenticator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuthnCounts {
    pub users: u64,
    pub not_mine: u64,
    pub rejected: u64,
    pub nanos: u64,
}

/// The chain, the token book it identifies callers by, and the auth state.
pub struct AuthGate {
    chain: Vec<(Box<dyn Authenticator>, AuthnStats)>,
    tokens: Arc<Tokens>,
    /// HTTP Basic passwords already checked.
    pub basic: BasicCache,
    enabled: AtomicBool,
    revision: AtomicU64,
    /// Whether a client certificate's name can identify a caller (`--client-cert-auth`): only
    /// then is it parsed out of the connection.
    reads_certificates: bool,
    /// The newest permission view heard of.
    view: std::sync::RwLock<SharedView>,
    /// The store's auth changes, not yet observed.
    events: std::sync::Mutex<Option<UnboundedReceiver<AuthEvent>>>,
}

impl std::fmt::Debug for AuthGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthGate")
            .field("enabled", &self.enabled())
            .field("revision", &self.revision())
            .finish_non_exhaustive()
    }
}

impl AuthGate {
    /// etcd's chain: token, then (with `client_cert_auth`) the certificate's common name.
    pub fn new(client_cert_auth: bool) -> Self {
        let tokens = Arc::new(Tokens::default());
        let mut chain: Vec<Box<dyn Authenticator>> = vec![Box::new(TokenAuthenticator {
            tokens: tokens.clone(),
        })];
        if client_cert_auth {
            chain.push(Box::new(ClientCertAuthenticator));
        }
        chain.push(Box::new(BasicAuthenticator));
        let mut gate = Self::with_chain(tokens, chain);
        gate.reads_certificates = client_cert_auth;
        gate
    }

    pub fn with_chain(tokens: Arc<Tokens>, chain: Vec<Box<dyn Authenticator>>) -> Self {
        Self {
            chain: chain
                .into_iter()
                .map(|a| (a, AuthnStats::default()))
                .collect(),
            tokens,
            basic: BasicCache::default(),
            enabled: AtomicBool::new(false),
            revision: AtomicU64::new(0),
            reads_certificates: false,
            view: std::sync::RwLock::new(AuthView::disabled().shared()),
            events: std::sync::Mutex::new(None),
        }
    }

    /// Where the store's auth changes arrive from now on, and where uses of simple tokens
    /// are reported.
    pub fn follow(&self, events: UnboundedReceiver<AuthEvent>, used: Recipient<TokenUsed>) {
        *self.events.lock().unwrap_or_else(|p| p.into_inner()) = Some(events);
        let _ = self.tokens.used.set(used);
    }

    /// Observes every change the store has queued so far, in order.
    fn catch_up(&self) {
        let mut guard = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = guard.as_mut() {
            while let Ok(ev) = rx.try_recv() {
                self.observe(ev);
            }
        }
    }

    pub fn enabled(&self) -> bool {
        self.catch_up();
        self.enabled.load(Ordering::Acquire)
    }

    pub fn revision(&self) -> u64 {
        self.catch_up();
        self.revision.load(Ordering::Acquire)
    }

    /// The newest permission view heard of.
    pub fn view(&self) -> SharedView {
        self.catch_up();
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Follows the store's auth changes.
    pub fn observe(&self, ev: AuthEvent) {
        match ev {
            AuthEvent::View(view) => {
                *self.view.write().unwrap_or_else(|p| p.into_inner()) = view;
            }
            AuthEvent::State { enabled, revision } => {
                self.revision.store(revision, Ordering::Release);
                self.enabled.store(enabled, Ordering::Release);
            }
            AuthEvent::Tokens(book) => self.tokens.set(book),
        }
    }

    /// Who the request runs as: the first authenticator that claims it, or nobody. A rejected
    /// credential fails the request (etcd: `invalid auth token`).
    pub fn identify(&self, creds: &Credentials) -> Result<AuthInfo, EtcdError> {
        if !self.enabled() {
            return Ok(AuthInfo::default());
        }
        let revision = self.revision.load(Ordering::Acquire);
        for (a, stats) in &self.chain {
            let start = Instant::now();
            let verdict = a.authenticate(creds, revision);
            let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            stats.nanos.fetch_add(nanos, Ordering::Relaxed);
            match verdict {
                Verdict::User(info) => {
                    stats.users.fetch_add(1, Ordering::Relaxed);
                    return Ok(info);
                }
                Verdict::Rejected(e) => {
                    stats.rejected.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
                Verdict::NotMine => {
                    stats.not_mine.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(AuthInfo::default())
    }

    /// Whether `creds` carry a simple token that a login not yet applied here may assign.
    pub fn may_be_unapplied(&self, creds: &Credentials) -> bool {
        self.tokens.book().is_simple()
            && creds
                .token
                .as_deref()
                .and_then(|t| t.split_once('.'))
                .is_some_and(|(prefix, n)| {
                    prefix.len() == 16
                        && prefix.bytes().all(|b| b.is_ascii_alphabetic())
                        && n.parse::<u64>().is_ok()
                })
    }

    /// The credentials of a gRPC request that this chain looks at: the `token` metadata, and
    /// the verified certificate's CN only when certificates identify callers.
    pub fn credentials<T>(&self, req: &tonic::Request<T>) -> Credentials {
        Credentials {
            token: req
                .metadata()
                .get("token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            cert_cn: if self.reads_certificates {
                crate::tls::client_common_name(req)
            } else {
                None
            },
            basic: req.extensions().get::<BasicOutcome>().cloned(),
        }
    }

    /// Per-authenticator counts, in chain order.
    pub fn stats(&self) -> Vec<(&'static str, AuthnCounts)> {
        self.chain
            .iter()
            .map(|(a, s)| {
                (
                    a.name(),
                    AuthnCounts {
                        users: s.users.load(Ordering::Relaxed),
                        not_mine: s.not_mine.load(Ordering::Relaxed),
                        rejected: s.rejected.load(Ordering::Relaxed),
                        nanos: s.nanos.load(Ordering::Relaxed),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "authn_tests.rs"]
mod tests;
