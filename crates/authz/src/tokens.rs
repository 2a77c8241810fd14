//! Token providers, owned by the auth store actor: `simple` (random, stateful, expiring when
//! unused) and `jwt` (signed, stateless, carrying the user name and auth revision).
//!
//! [`TokenProvider`] is the actor's mutable state: it drafts simple tokens for logins about to
//! be proposed, registers them when the login applies (on every member, in log order with the
//! password changes and deletions that end them), restarts a token's TTL when it is used,
//! expires unused ones, and signs JWTs. After each change the actor publishes a [`TokenBook`]:
//! an immutable snapshot the front identifies callers by ([`actcd_types::auth::TokenCheck`]).
//! The simple tokens sit in a persistent map, so publishing after a login costs one path copy,
//! not a copy of every token.
//!
//! Simple tokens follow etcd's shape, 16 random letters, a dot and a counter, and live
//! `--auth-token-ttl` past their last use, checked at etcd's resolution of one second
//! ([`TokenProvider::expire`]). Their time is passed in by the caller (tokio's clock in the
//! actor, paused in tests). JWT expiry is checked against the wall clock, as any JWT reader
//! does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actcd_types::auth::{SharedTokens, TokenCheck};
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
    Jwt(Arc<JwtTokens>),
}

impl TokenProvider {
    /// Reads etcd's `--auth-token` syntax: `simple`, or
    /// `jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m`.
    pub fn parse(spec: &str, simple_ttl: Duration) -> Result<TokenProvider, String> {
        let mut parts = spec.split(',');
        match parts.next().unwrap_or_default() {
            "simple" => Ok(TokenProvider::Simple(SimpleTokens::new(simple_ttl))),
            "jwt" => JwtTokens::parse(parts).map(|j| TokenProvider::Jwt(Arc::new(j))),
            other => Err(format!("unknown token type {other:?} (want simple or jwt)")),
        }
    }

    /// A whole simple token (etcd's shape: 16 random letters, a dot, a counter), chosen before
    /// the login goes through the log; empty for JWT. The login's entry carries it, and every
    /// member registers it when the login applies ([`Self::register`]).
    pub fn draft(&mut self) -> String {
        match self {
            TokenProvider::Simple(s) => {
                let mut rng = rand::rng();
                let prefix: String = (0..PREFIX_LEN)
                    .map(|_| LETTERS[rng.random_range(0..LETTERS.len())] as char)
                    .collect();
                s.next += 1;
                format!("{prefix}.{}", s.next)
            }
            TokenProvider::Jwt(_) => String::new(),
        }
    }

    /// Records a simple `token` for `username`, whose login applied at auth `revision`, at
    /// `now`. Nothing for JWTs, or while auth is off.
    pub fn register(&mut self, username: &[u8], revision: u64, token: &str, now: Instant) {
        if let TokenProvider::Simple(s) = self
            && s.enabled
            && !token.is_empty()
        {
            s.live
                .insert(token.to_string(), (Arc::from(username), revision));
            s.deadlines.insert(token.to_string(), now + s.ttl);
        }
    }

    /// A simple token was used at `now`: it lives a TTL from now.
    pub fn touch(&mut self, token: &str, now: Instant) {
        if let TokenProvider::Simple(s) = self
            && let Some(deadline) = s.deadlines.get_mut(token)
        {
            *deadline = now + s.ttl;
        }
    }

    /// Ends `username`'s simple tokens from logins applied before auth `revision` (the user
    /// was deleted, or its password changed, at that revision). Logins apply in log order
    /// here, so a token registered later used the new password. Whether any ended.
    pub fn invalidate_user(&mut self, username: &[u8], revision: u64) -> bool {
        let TokenProvider::Simple(s) = self else {
            return false;
        };
        let ended: Vec<String> = s
            .live
            .iter()
            .filter(|(_, (u, issued_at))| &**u == username && *issued_at < revision)
            .map(|(t, _)| t.clone())
            .collect();
        for t in &ended {
            s.live.remove(t);
            s.deadlines.remove(t);
        }
        !ended.is_empty()
    }

    /// Auth was turned on or off; off ends every simple token. Whether anything changed.
    pub fn set_enabled(&mut self, on: bool) -> bool {
        let TokenProvider::Simple(s) = self else {
            return false;
        };
        let changed = s.enabled != on || (!on && !s.live.is_empty());
        s.enabled = on;
        if !on {
            s.live.clear();
            s.deadlines.clear();
        }
        changed
    }

    /// Ends the simple tokens unused for a TTL by `now`. Whether any ended.
    pub fn expire(&mut self, now: Instant) -> bool {
        let TokenProvider::Simple(s) = self else {
            return false;
        };
        let before = s.deadlines.len();
        let live = &mut s.live;
        s.deadlines.retain(|t, deadline| {
            let keep = *deadline > now;
            if !keep {
                live.remove(t);
            }
            keep
        });
        s.deadlines.len() != before
    }

    /// The JWT signer, to sign with off the actor's thread; `None` for simple tokens.
    pub fn signer(&self) -> Option<Arc<JwtTokens>> {
        match self {
            TokenProvider::Simple(_) => None,
            TokenProvider::Jwt(j) => Some(j.clone()),
        }
    }

    /// The book to identify callers by, as of now.
    pub fn publish(&self) -> SharedTokens {
        Arc::new(match self {
            TokenProvider::Simple(s) => TokenBook::Simple(s.live.clone()),
            TokenProvider::Jwt(j) => TokenBook::Jwt(j.clone()),
        })
    }
}

/// token → (user, auth revision its login applied at)
type Live = imbl::HashMap<String, (Arc<[u8]>, u64)>;

/// etcd's `simple` tokens.
#[derive(Debug)]
pub struct SimpleTokens {
    ttl: Duration,
    next: u64,
    enabled: bool,
    live: Live,
    /// token → when it ends unless used again
    deadlines: HashMap<String, Instant>,
}

impl SimpleTokens {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            next: 0,
            enabled: true,
            live: Live::new(),
            deadlines: HashMap::new(),
        }
    }
}

/// The published tokens: what the front identifies callers by.
#[derive(Debug)]
pub enum TokenBook {
    Simple(Live),
    Jwt(Arc<JwtTokens>),
}

impl TokenBook {
    /// An empty book of simple tokens (before the auth actor's first one arrives).
    pub fn empty() -> SharedTokens {
        Arc::new(TokenBook::Simple(Live::new()))
    }
}

impl TokenCheck for TokenBook {
    fn info(&self, token: &str, current_revision: u64) -> Option<AuthInfo> {
        match self {
            TokenBook::Simple(live) => live.get(token).map(|(user, _)| AuthInfo {
                username: user.to_vec(),
                revision: current_revision,
            }),
            TokenBook::Jwt(j) => j.info(token),
        }
    }

    fn is_simple(&self) -> bool {
        matches!(self, TokenBook::Simple(_))
    }
}

/// etcd's claims, plus `username_bytes` for a name that is not UTF-8 (see [`JwtTokens::sign`]).
#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    username_bytes: Option<Vec<u8>>,
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
            let probe = tokens.sign(b"probe", 1).map_err(|e| e.to_string())?;
            if tokens.info(&probe).is_none() {
                return Err("auth: public and private keys don't match".into());
            }
        }
        Ok(tokens)
    }

    /// A token for `username`, whose login applied at auth `revision`.
    ///
    /// etcd (Go) writes the name into the `username` claim with every byte that is not UTF-8
    /// replaced by U+FFFD, so with etcd a user whose name is not UTF-8 logs in but is then
    /// judged as another (usually missing) user, and could even be judged as a user whose name
    /// is that replaced text. Here such a name also goes whole into `username_bytes`, and the
    /// token names exactly that user; a UTF-8 name gives etcd's claims unchanged.
    pub fn sign(&self, username: &[u8], revision: u64) -> Result<String, EtcdError> {
        let key = self.sign.as_ref().ok_or_else(|| {
            EtcdError::internal("auth: token signing attempted with verify-only key")
        })?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let exact = std::str::from_utf8(username).is_err();
        let claims = Claims {
            username: crate::go_lossy(username),
            username_bytes: exact.then(|| username.to_vec()),
            revision,
            exp: (now + self.ttl).as_secs(),
        };
        jsonwebtoken::encode(&Header::new(self.alg), &claims, key).map_err(EtcdError::internal)
    }

    fn info(&self, token: &str) -> Option<AuthInfo> {
        let mut v = Validation::new(self.alg);
        v.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, &self.verify, &v).ok()?;
        let Claims {
            username,
            username_bytes,
            revision,
            ..
        } = data.claims;
        Some(AuthInfo {
            username: username_bytes.unwrap_or_else(|| username.into_bytes()),
            revision,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simple() -> TokenProvider {
        TokenProvider::parse("simple", Duration::from_secs(300)).unwrap()
    }

    /// A simple token as a login's entry carries it, registered as every member does.
    fn login(p: &mut TokenProvider, user: &str, revision: u64) -> String {
        let t = p.draft();
        p.register(user.as_bytes(), revision, &t, Instant::now());
        t
    }

    fn valid(p: &TokenProvider, token: &str) -> bool {
        p.publish().info(token, 9).is_some()
    }

    #[tokio::test(start_paused = true)]
    async fn simple_tokens_expire_unless_used() {
        let mut p = simple();
        let t = p.draft();
        let (prefix, n) = t.split_once('.').unwrap();
        assert_eq!(prefix.len(), 16);
        assert!(prefix.bytes().all(|b| b.is_ascii_alphabetic()));
        assert!(n.parse::<u64>().is_ok());
        assert_ne!(p.draft(), t, "every draft is new");
        assert!(!valid(&p, &t), "unknown until its login applies");
        let before = p.publish();
        p.register(b"alice", 5, &t, Instant::now());
        assert!(p.signer().is_none(), "nothing to sign");
        assert!(
            before.info(&t, 9).is_none(),
            "a published book never changes"
        );
        let book = p.publish();
        assert!(book.is_simple());
        assert_eq!(
            book.info(&t, 9).unwrap().revision,
            9,
            "the current revision"
        );
        assert_eq!(book.info(&t, 9).unwrap().username, b"alice");
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!p.expire(Instant::now()));
        p.touch(&t, Instant::now());
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!p.expire(Instant::now()), "use restarts the TTL");
        assert!(valid(&p, &t));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(p.expire(Instant::now()), "unused past the TTL");
        assert!(!valid(&p, &t));
        assert!(!valid(&p, "forged.1"));
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
                name: "a login with the new password, applied at the change's revision",
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
            let mut p = simple();
            let t = login(&mut p, "alice", c.login_revision);
            assert_eq!(p.invalidate_user(b"alice", c.invalidated_at), !c.want_valid);
            assert_eq!(valid(&p, &t), c.want_valid, "{}", c.name);
        }
        let mut p = simple();
        let a = login(&mut p, "alice", 1);
        let b = login(&mut p, "bob", 1);
        p.invalidate_user(b"alice", 2);
        assert!(!valid(&p, &a));
        assert!(valid(&p, &b), "another user's tokens stay");
        assert!(p.set_enabled(false));
        assert!(!valid(&p, &b));
        let off = login(&mut p, "bob", 3);
        assert!(!valid(&p, &off), "no tokens while auth is off");
        assert!(p.set_enabled(true));
        let on = login(&mut p, "bob", 3);
        assert!(valid(&p, &on));
    }

    fn write(dir: &std::path::Path, name: &str, data: &[u8]) -> String {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p.display().to_string()
    }

    #[test]
    /// etcd #15677 (3.4.25 / 3.5.8): a JWT signed with the right key but without `username`
    /// or `revision`, or with them of the wrong type, made etcd panic; here it is refused like
    /// any token that names nobody.
    fn a_signed_jwt_missing_its_claims_is_refused() {
        #[derive(Serialize)]
        struct Odd {
            #[serde(skip_serializing_if = "Option::is_none")]
            username: Option<serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            revision: Option<serde_json::Value>,
            exp: u64,
        }
        let dir = tempfile::tempdir().unwrap();
        let secret = b"a shared secret of some length";
        let path = write(dir.path(), "hs.key", secret);
        let p = TokenProvider::parse(
            &format!("jwt,priv-key={path},sign-method=HS256"),
            Duration::from_secs(300),
        )
        .unwrap();
        let book = p.publish();
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 300;
        let key = EncodingKey::from_secret(secret);
        let s = |v: &str| Some(serde_json::Value::from(v));
        let n = |v: i64| Some(serde_json::Value::from(v));
        for (username, revision) in [
            (None, n(1)),
            (s("carol"), None),
            (None, None),
            (n(7), n(1)),
            (s("carol"), s("1")),
            (s("carol"), n(-1)),
        ] {
            let claims = Odd {
                username,
                revision,
                exp,
            };
            let t = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
            assert!(
                book.info(&t, 1).is_none(),
                "{:?} / {:?}",
                claims.username,
                claims.revision
            );
        }
        // The same key signs a whole token that works: the refusals are the claims'.
        let t = p.signer().unwrap().sign(b"carol", 1).unwrap();
        assert!(book.info(&t, 1).is_some());
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
            let mut p = TokenProvider::parse(&spec, ttl).unwrap();
            assert_eq!(p.draft(), "");
            let t = p.signer().unwrap().sign(b"carol", 42).unwrap();
            let book = p.publish();
            assert!(!book.is_simple());
            assert_eq!(
                book.info(&t, 99),
                Some(AuthInfo {
                    username: "carol".into(),
                    revision: 42
                }),
                "{spec}: the revision in the claims"
            );
            let mut forged = t.clone();
            forged.pop();
            forged.push(if t.ends_with('A') { 'B' } else { 'A' });
            assert!(book.info(&forged, 99).is_none(), "{spec}");
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
        let t = signer.signer().unwrap().sign(b"carol", 1).unwrap();
        assert!(verify_only.publish().info(&t, 1).is_none());
        assert!(verify_only.signer().unwrap().sign(b"carol", 1).is_err());
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

    /// A name that is not UTF-8: etcd's claim holds the name as Go writes it (one U+FFFD per
    /// bad byte), and the exact name rides beside it, so the token names that user and no
    /// other; a UTF-8 name gives etcd's claims only. Simple tokens keep the bytes as they are.
    #[test]
    fn tokens_name_users_whose_names_are_not_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let secret = write(dir.path(), "hs.key", b"a shared secret of some length");
        let p = TokenProvider::parse(
            &format!("jwt,priv-key={secret},sign-method=HS256"),
            Duration::from_secs(300),
        )
        .unwrap();
        let TokenProvider::Jwt(j) = &p else {
            panic!("jwt")
        };
        let claims = |t: &str| {
            jsonwebtoken::decode::<Claims>(t, &j.verify, &Validation::new(Algorithm::HS256))
                .unwrap()
                .claims
        };
        let t = p.signer().unwrap().sign(b"u\xff\xfe", 3).unwrap();
        let c = claims(&t);
        assert_eq!(c.username, "u\u{FFFD}\u{FFFD}", "etcd's claim");
        assert_eq!(c.username_bytes, Some(b"u\xff\xfe".to_vec()));
        assert_eq!(
            p.publish().info(&t, 9).map(|i| i.username),
            Some(b"u\xff\xfe".to_vec())
        );
        let t = p
            .signer()
            .unwrap()
            .sign("u\u{FFFD}\u{FFFD}".as_bytes(), 3)
            .unwrap();
        assert_eq!(claims(&t).username_bytes, None, "UTF-8: etcd's claims");
        assert_eq!(
            p.publish().info(&t, 9).map(|i| i.username),
            Some("u\u{FFFD}\u{FFFD}".as_bytes().to_vec()),
            "the look-alike is another user"
        );

        let mut simple = simple();
        let t = simple.draft();
        simple.register(b"u\xff\xfe", 2, &t, Instant::now());
        assert_eq!(
            simple.publish().info(&t, 9).map(|i| i.username),
            Some(b"u\xff\xfe".to_vec())
        );
        assert!(!simple.invalidate_user("u\u{FFFD}\u{FFFD}".as_bytes(), 3));
        assert!(simple.invalidate_user(b"u\xff\xfe", 3));
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
            username_bytes: None,
            revision: 1,
            exp: 1_000,
        };
        let old = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, key).unwrap();
        assert!(j.info(&old).is_none());
    }
}
