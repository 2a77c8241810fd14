//! Token providers, kept by the front: `simple` (random, stateful, expiring when unused) and
//! `jwt` (signed, stateless, carrying the user name and auth revision).
//!
//! Simple tokens follow etcd's shape, 16 random letters, a dot and a counter, and live
//! `--auth-token-ttl` past their last use. Their time is tokio's clock, so tests run it paused.
//! JWT expiry is checked against the wall clock, as any JWT reader does.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actcd_types::{AuthInfo, EtcdError};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const PREFIX_LEN: usize = 16;

/// The tokens Authenticate hands out, as `--auth-token` chose.
#[derive(Debug)]
pub enum TokenProvider {
    Simple(SimpleTokens),
    Jwt(JwtTokens),
}

impl TokenProvider {
    /// Reads etcd's `--auth-token` syntax: `simple`, or
    /// `jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m`.
    pub fn parse(spec: &str, simple_ttl: Duration) -> Result<TokenProvider, String> {
        let mut parts = spec.split(',');
        match parts.next().unwrap_or_default() {
            "simple" => Ok(TokenProvider::Simple(SimpleTokens::new(simple_ttl))),
            "jwt" => JwtTokens::parse(parts).map(TokenProvider::Jwt),
            other => Err(format!("unknown token type {other:?} (want simple or jwt)")),
        }
    }

    /// A whole simple token (etcd's shape: 16 random letters, a dot, a counter), chosen before
    /// the login goes through the log; empty for JWT. The login's entry carries it, and every
    /// member registers it when the login applies ([`Self::register`]), so the token works on
    /// every member, as etcd's do.
    pub fn gen_simple_token(&self) -> String {
        match self {
            TokenProvider::Simple(s) => {
                let mut rng = rand::rng();
                let prefix: String = (0..PREFIX_LEN)
                    .map(|_| LETTERS[rng.random_range(0..LETTERS.len())] as char)
                    .collect();
                let n = s.next.fetch_add(1, Ordering::Relaxed);
                format!("{prefix}.{n}")
            }
            TokenProvider::Jwt(_) => String::new(),
        }
    }

    /// Records a simple `token` for `username`, whose login applied at auth `revision` (from
    /// the applied log, in order with the invalidations before it). JWTs need no record.
    pub fn register(&self, username: &str, revision: u64, token: &str) {
        if let TokenProvider::Simple(s) = self {
            s.register(username, revision, token);
        }
    }

    /// A signed token for `username`, whose login applied at auth `revision`; `None` for
    /// simple tokens, which are chosen before the login ([`Self::gen_simple_token`]).
    pub fn sign(&self, username: &str, revision: u64) -> Result<Option<String>, EtcdError> {
        match self {
            TokenProvider::Simple(_) => Ok(None),
            TokenProvider::Jwt(j) => j.assign(username, revision).map(Some),
        }
    }

    /// Who a token names: simple tokens at `current_revision` (and their TTL restarts), JWTs at
    /// the revision they carry. `None`: unknown, expired or forged.
    pub fn info(&self, token: &str, current_revision: u64) -> Option<AuthInfo> {
        match self {
            TokenProvider::Simple(s) => s.info(token, current_revision),
            TokenProvider::Jwt(j) => j.info(token),
        }
    }

    /// Ends a user's simple tokens issued before auth `revision` (the user was deleted, or
    /// its password changed, at that revision). Remembered, so a token assigned later for a
    /// login that applied earlier is refused too, whatever order the two reach the front in.
    pub fn invalidate_user(&self, username: &str, revision: u64) {
        if let TokenProvider::Simple(s) = self {
            s.invalidate_user(username, revision);
        }
    }

    pub fn enable(&self) {
        if let TokenProvider::Simple(s) = self {
            s.enabled.store(true, Ordering::Release);
        }
    }

    /// Auth was disabled: every simple token ends.
    pub fn disable(&self) {
        if let TokenProvider::Simple(s) = self {
            s.enabled.store(false, Ordering::Release);
            s.lock().live.clear();
        }
    }
}

/// etcd's `simple` tokens.
#[derive(Debug)]
pub struct SimpleTokens {
    ttl: Duration,
    tokens: Mutex<Book>,
    next: AtomicU64,
    enabled: AtomicBool,
}

impl SimpleTokens {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            tokens: Mutex::new(Book::default()),
            next: AtomicU64::new(1),
            enabled: AtomicBool::new(true),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register(&self, username: &str, revision: u64, token: &str) {
        let now = Instant::now();
        let mut book = self.lock();
        if book.live.len() % 1024 == 1023 {
            book.live.retain(|_, (_, _, exp)| *exp > now);
        }
        book.live.insert(
            token.to_string(),
            (username.to_string(), revision, now + self.ttl),
        );
    }

    fn info(&self, token: &str, revision: u64) -> Option<AuthInfo> {
        let now = Instant::now();
        let mut book = self.lock();
        let Book { live, invalidated } = &mut *book;
        let (user, issued_at, exp) = live.get_mut(token)?;
        let revoked = invalidated
            .get(user.as_str())
            .is_some_and(|r| *r > *issued_at);
        if *exp <= now || revoked {
            live.remove(token);
            return None;
        }
        *exp = now + self.ttl;
        Some(AuthInfo {
            username: user.clone(),
            revision,
        })
    }

    fn invalidate_user(&self, username: &str, revision: u64) {
        let mut book = self.lock();
        // Tokens of logins applied at or after the change stay: they used the new password.
        book.live
            .retain(|_, (u, issued_at, _)| u != username || *issued_at >= revision);
        let r = book.invalidated.entry(username.to_string()).or_default();
        *r = (*r).max(revision);
    }
}

#[derive(Debug, Default)]
struct Book {
    /// token → (user, auth revision its login applied at, expiry)
    live: HashMap<String, (String, u64, Instant)>,
    /// user → the auth revision its tokens were last invalidated at
    invalidated: HashMap<String, u64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    username: String,
    revision: u64,
    exp: u64,
}

/// etcd's `jwt` tokens.
pub struct JwtTokens {
    alg: Algorithm,
    sign: Option<EncodingKey>,
    verify: DecodingKey,
    ttl: Duration,
}

impl std::fmt::Debug for JwtTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtTokens")
            .field("alg", &self.alg)
            .field("ttl", &self.ttl)
            .field("can_sign", &self.sign.is_some())
            .finish()
    }
}

fn algorithm(name: &str) -> Result<Algorithm, String> {
    Ok(match name {
        "RS256" => Algorithm::RS256,
        "RS384" => Algorithm::RS384,
        "RS512" => Algorithm::RS512,
        "PS256" => Algorithm::PS256,
        "PS384" => Algorithm::PS384,
        "PS512" => Algorithm::PS512,
        "ES256" => Algorithm::ES256,
        "ES384" => Algorithm::ES384,
        "HS256" => Algorithm::HS256,
        "HS384" => Algorithm::HS384,
        "HS512" => Algorithm::HS512,
        "EdDSA" => Algorithm::EdDSA,
        other => return Err(format!("auth: invalid auth signature method {other:?}")),
    })
}

impl JwtTokens {
    fn parse<'a>(opts: impl Iterator<Item = &'a str>) -> Result<Self, String> {
        let (mut pub_key, mut priv_key, mut method, mut ttl) = (None, None, None, None);
        for opt in opts {
            let (k, v) = opt
                .split_once('=')
                .ok_or_else(|| format!("auth: invalid auth options ({opt:?})"))?;
            match k {
                "pub-key" => pub_key = Some(v.to_string()),
                "priv-key" => priv_key = Some(v.to_string()),
                "sign-method" => method = Some(v.to_string()),
                "ttl" => ttl = Some(actcd_types::duration::parse_go_duration(v)?),
                other => return Err(format!("auth: invalid auth options (unknown {other:?})")),
            }
        }
        let method = method.ok_or("auth: invalid auth options (sign-method is required)")?;
        let alg = algorithm(&method)?;
        let read = |p: &str| std::fs::read(p).map_err(|e| format!("cannot read {p}: {e}"));
        let bad = |e: jsonwebtoken::errors::Error| format!("auth: bad {method} key: {e}");
        let (sign, verify) = match alg {
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                let secret = read(priv_key.as_deref().ok_or("auth: missing key data")?)?;
                (
                    Some(EncodingKey::from_secret(&secret)),
                    DecodingKey::from_secret(&secret),
                )
            }
            _ => {
                let public = read(pub_key.as_deref().ok_or("auth: missing key data")?)?;
                let verify = match alg {
                    Algorithm::ES256 | Algorithm::ES384 => DecodingKey::from_ec_pem(&public),
                    Algorithm::EdDSA => DecodingKey::from_ed_pem(&public),
                    _ => DecodingKey::from_rsa_pem(&public),
                }
                .map_err(bad)?;
                let sign = match priv_key.as_deref() {
                    None => None,
                    Some(p) => {
                        let private = read(p)?;
                        Some(
                            match alg {
                                Algorithm::ES256 | Algorithm::ES384 => {
                                    EncodingKey::from_ec_pem(&private)
                                }
                                Algorithm::EdDSA => EncodingKey::from_ed_pem(&private),
                                _ => EncodingKey::from_rsa_pem(&private),
                            }
                            .map_err(bad)?,
                        )
                    }
                };
                (sign, verify)
            }
        };
        let tokens = JwtTokens {
            alg,
            sign,
            verify,
            ttl: ttl.unwrap_or(Duration::from_secs(300)),
        };
        // A key pair that doesn't match would hand out tokens nobody can use.
        if tokens.sign.is_some() {
            let probe = tokens.assign("probe", 1).map_err(|e| e.to_string())?;
            if tokens.info(&probe).is_none() {
                return Err("auth: public and private keys don't match".into());
            }
        }
        Ok(tokens)
    }

    fn assign(&self, username: &str, revision: u64) -> Result<String, EtcdError> {
        let key = self.sign.as_ref().ok_or_else(|| {
            EtcdError::internal("auth: token signing attempted with verify-only key")
        })?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let claims = Claims {
            username: username.to_string(),
            revision,
            exp: (now + self.ttl).as_secs(),
        };
        jsonwebtoken::encode(&Header::new(self.alg), &claims, key).map_err(EtcdError::internal)
    }

    fn info(&self, token: &str) -> Option<AuthInfo> {
        let mut v = Validation::new(self.alg);
        v.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, &self.verify, &v).ok()?;
        Some(AuthInfo {
            username: data.claims.username,
            revision: data.claims.revision,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simple token as a login's entry carries it, registered as every member does.
    fn login(p: &TokenProvider, user: &str, revision: u64) -> String {
        let t = p.gen_simple_token();
        p.register(user, revision, &t);
        t
    }

    #[tokio::test(start_paused = true)]
    async fn simple_tokens_expire_unless_used() {
        let p = TokenProvider::parse("simple", Duration::from_secs(300)).unwrap();
        let t = p.gen_simple_token();
        let (prefix, n) = t.split_once('.').unwrap();
        assert_eq!(prefix.len(), 16);
        assert!(prefix.bytes().all(|b| b.is_ascii_alphabetic()));
        assert!(n.parse::<u64>().is_ok());
        assert!(p.info(&t, 9).is_none(), "unknown until its login applies");
        p.register("alice", 5, &t);
        assert_eq!(p.sign("alice", 5).unwrap(), None, "nothing to sign");
        assert_eq!(p.info(&t, 9).unwrap().revision, 9, "the current revision");
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(p.info(&t, 9).is_some(), "use refreshes the TTL");
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(p.info(&t, 9).is_some());
        tokio::time::advance(Duration::from_secs(301)).await;
        assert!(p.info(&t, 9).is_none(), "unused past the TTL");
        assert!(p.info("forged.1", 9).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn invalidation_and_disable_end_tokens() {
        struct Case {
            name: &'static str,
            login_revision: u64,
            invalidated_at: u64,
            want_valid: bool,
        }
        let cases = [
            Case {
                name: "a login before the change ends",
                login_revision: 1,
                invalidated_at: 2,
                want_valid: false,
            },
            Case {
                name: "a login with the new password, registered before the change is heard",
                login_revision: 2,
                invalidated_at: 2,
                want_valid: true,
            },
            Case {
                name: "a later login",
                login_revision: 3,
                invalidated_at: 2,
                want_valid: true,
            },
        ];
        for c in cases {
            let p = TokenProvider::parse("simple", Duration::from_secs(300)).unwrap();
            let t = login(&p, "alice", c.login_revision);
            p.invalidate_user("alice", c.invalidated_at);
            assert_eq!(p.info(&t, 3).is_some(), c.want_valid, "{}", c.name);
        }
        let p = TokenProvider::parse("simple", Duration::from_secs(300)).unwrap();
        let a = login(&p, "alice", 1);
        let b = login(&p, "bob", 1);
        p.invalidate_user("alice", 2);
        assert!(p.info(&a, 1).is_none());
        // A login that applied before the invalidation but is registered after it: refused.
        let late = login(&p, "alice", 1);
        assert!(p.info(&late, 2).is_none());
        let fresh = login(&p, "alice", 2);
        assert!(p.info(&fresh, 2).is_some());
        assert!(p.info(&b, 1).is_some());
        p.disable();
        assert!(p.info(&b, 1).is_none());
    }

    fn write(dir: &std::path::Path, name: &str, data: &[u8]) -> String {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p.display().to_string()
    }

    #[test]
    fn jwt_round_trips_and_refuses_forgeries() {
        let dir = tempfile::tempdir().unwrap();
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let ec_priv = write(dir.path(), "ec.key", ec.serialize_pem().as_bytes());
        let ec_pub = write(dir.path(), "ec.pub", ec.public_key_pem().as_bytes());
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let other_pub = write(dir.path(), "other.pub", other.public_key_pem().as_bytes());
        let secret = write(dir.path(), "hs.key", b"a shared secret of some length");
        let ttl = Duration::from_secs(300);
        for spec in [
            format!("jwt,pub-key={ec_pub},priv-key={ec_priv},sign-method=ES256,ttl=5m"),
            format!("jwt,priv-key={secret},sign-method=HS256"),
        ] {
            let p = TokenProvider::parse(&spec, ttl).unwrap();
            assert_eq!(p.gen_simple_token(), "");
            let t = p.sign("carol", 42).unwrap().unwrap();
            assert_eq!(
                p.info(&t, 99),
                Some(AuthInfo {
                    username: "carol".into(),
                    revision: 42
                }),
                "{spec}: the revision in the claims"
            );
            let mut forged = t.clone();
            forged.pop();
            forged.push(if t.ends_with('A') { 'B' } else { 'A' });
            assert!(p.info(&forged, 99).is_none(), "{spec}");
        }
        // Verify-only with another key: a token signed elsewhere is refused.
        let verify_only =
            TokenProvider::parse(&format!("jwt,pub-key={other_pub},sign-method=ES256"), ttl)
                .unwrap();
        let signer = TokenProvider::parse(
            &format!("jwt,pub-key={ec_pub},priv-key={ec_priv},sign-method=ES256"),
            ttl,
        )
        .unwrap();
        let t = signer.sign("carol", 1).unwrap().unwrap();
        assert!(verify_only.info(&t, 1).is_none());
        assert!(verify_only.sign("carol", 1).is_err());
        // Mismatched pair, bad method, missing key.
        assert!(
            TokenProvider::parse(
                &format!("jwt,pub-key={other_pub},priv-key={ec_priv},sign-method=ES256"),
                ttl
            )
            .is_err()
        );
        assert!(TokenProvider::parse("jwt,sign-method=XX1", ttl).is_err());
        assert!(TokenProvider::parse("jwt,sign-method=RS256", ttl).is_err());
        assert!(TokenProvider::parse("magic", ttl).is_err());
    }

    #[test]
    fn expired_jwts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = write(dir.path(), "hs.key", b"secret");
        let TokenProvider::Jwt(j) = TokenProvider::parse(
            &format!("jwt,priv-key={secret},sign-method=HS256"),
            Duration::ZERO,
        )
        .unwrap() else {
            panic!("jwt")
        };
        let key = j.sign.as_ref().unwrap();
        let claims = Claims {
            username: "u".into(),
            revision: 1,
            exp: 1_000,
        };
        let old = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, key).unwrap();
        assert!(j.info(&old).is_none());
    }
}
