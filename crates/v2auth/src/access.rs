//! Who is asking (`Caller`), key access checks, Basic auth parsing, bcrypt.

use crate::error::AuthError;
use crate::model::{AuthState, GUEST_ROLE};

/// The identity behind a request, as established by the caller (the HTTP front)
/// from the `Authorization` header: [`parse_basic`] then [`verify_password`]
/// against the stored hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// No `Authorization` header: treated as the guest role.
    Anonymous,
    /// Credentials checked and good.
    User(String),
    /// A header was sent but is malformed, names no user, or has a wrong
    /// password. Never falls back to guest.
    BadCredentials,
}

impl AuthState {
    /// etcd 3.4's `hasKeyPrefixAccess` for `/v2/keys`: auth disabled → yes;
    /// bad credentials → no; anonymous → the `guest` role (if it exists), which
    /// etcd checks without regard to `recursive`; a user → any of its roles
    /// (missing roles skipped, `root` grants all). `write` is any method other
    /// than GET/HEAD; write rights do not imply read rights.
    pub fn can_access(&self, caller: &Caller, key: &str, write: bool, recursive: bool) -> bool {
        if !self.enabled {
            return true;
        }
        match caller {
            Caller::BadCredentials => false,
            Caller::Anonymous => self
                .roles
                .get(GUEST_ROLE)
                .is_some_and(|r| r.has_access(key, write, false)),
            Caller::User(name) => self.users.get(name).is_some_and(|u| {
                u.roles.iter().any(|rn| {
                    self.role(rn)
                        .is_some_and(|r| r.has_access(key, write, recursive))
                })
            }),
        }
    }

    /// etcd's `hasRootAccess`: auth disabled → yes; otherwise the caller must be a
    /// user that holds the `root` role.
    pub fn is_root_caller(&self, caller: &Caller) -> bool {
        if !self.enabled {
            return true;
        }
        matches!(caller, Caller::User(n) if self.user_is_root(n))
    }
}

/// Parse an `Authorization` header value of the form `Basic base64(user:pass)`
/// (scheme case-insensitive, standard padded base64, split at the first `:`),
/// as Go's `Request.BasicAuth` does. `None` if malformed or not UTF-8.
pub fn parse_basic(header_value: &str) -> Option<(String, String)> {
    const PREFIX: &str = "Basic ";
    let head = header_value.get(..PREFIX.len())?;
    if !head.eq_ignore_ascii_case(PREFIX) {
        return None;
    }
    let decoded = base64_std_decode(&header_value[PREFIX.len()..])?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, pass) = text.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

/// Strict standard base64 with padding (Go's `base64.StdEncoding`).
fn base64_std_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return None;
    }
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    let chunks = b.len() / 4;
    for (i, ch) in b.chunks(4).enumerate() {
        let last = i + 1 == chunks;
        let pad = ch.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n: u32 = 0;
        for &c in &ch[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Go rejects non-zero bits left over before the padding.
        if (pad == 1 && bytes[2] != 0) || (pad == 2 && bytes[1] != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

/// bcrypt cost etcd v2 hashes with (Go's `bcrypt.DefaultCost`).
pub const ETCD_BCRYPT_COST: u32 = 10;
/// Cheapest bcrypt cost (for tests).
pub const MIN_BCRYPT_COST: u32 = 4;

/// bcrypt hash of `pw` at `cost` (etcd v2 uses 10, bcrypt's default; tests use
/// `bcrypt::MIN_COST`). Blocking and slow on purpose: run it off the event loop.
pub fn hash_password(pw: &str, cost: u32) -> Result<String, AuthError> {
    bcrypt::hash(pw, cost).map_err(|e| AuthError::Hash(e.to_string()))
}

/// Does `pw` match the bcrypt `hash`? A malformed hash never matches. Blocking.
pub fn verify_password(hash: &str, pw: &str) -> bool {
    bcrypt::verify(pw, hash).unwrap_or(false)
}

/// The caller for a request, given its `Authorization` header (if any): parses,
/// looks the user up and checks the password. Blocking (bcrypt).
pub fn authenticate(state: &AuthState, authorization: Option<&str>) -> Caller {
    let Some(value) = authorization.filter(|v| !v.is_empty()) else {
        return Caller::Anonymous;
    };
    let Some((name, pw)) = parse_basic(value) else {
        return Caller::BadCredentials;
    };
    match state.users.get(&name) {
        Some(u) if verify_password(&u.password_hash, &pw) => Caller::User(name),
        _ => Caller::BadCredentials,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, User};

    fn user(name: &str, roles: &[&str]) -> User {
        User {
            name: name.into(),
            password_hash: String::new(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            last_modified: 0,
            roles_uncanonical: false,
        }
    }

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    fn state() -> AuthState {
        let mut st = AuthState {
            enabled: true,
            ..AuthState::default()
        };
        for u in [
            user("root", &["root"]),
            user("w", &["writer"]),
            user("r", &["reader"]),
            user("x", &["ghost", "rec"]),
            user("admin", &["reader", "root"]),
        ] {
            st.users.insert(u.name.clone(), u);
        }
        for r in [
            Role::new("writer", vec![], v(&["/w/*"])),
            Role::new("reader", v(&["/r/*", "/one"]), vec![]),
            Role::new("rec", v(&["/d*", "/e/*", "/m/*/leaf"]), vec![]),
            Role::new("guest", v(&["/pub/*"]), vec![]),
        ] {
            st.roles.insert(r.name.clone(), r);
        }
        st
    }

    #[test]
    fn can_access_matrix() {
        use Caller::*;
        let u = |n: &str| User(n.to_string());
        // (caller, key, write, recursive, allowed); mirrors the ACCESS transcript
        // (checked against etcd 3.4.23) plus the glob-only rows marked RFC.
        let rows: Vec<(Caller, &str, bool, bool, bool)> = vec![
            (u("w"), "/w/a", true, false, true),
            (u("w"), "/w/a", false, false, false), // write does not imply read
            (u("r"), "/r/a", false, false, true),
            (u("r"), "/r/a", true, false, false),
            (u("r"), "/one", false, false, true),
            (u("r"), "/one/x", false, false, false),
            (u("r"), "/r", false, true, false), // "/r/*" does not cover "/r" itself
            (u("x"), "/d", false, true, true),
            (u("x"), "/e", false, true, false),
            (u("x"), "/e/", false, true, true),
            (u("x"), "/d/a", false, false, true), // missing role "ghost" skipped
            (u("x"), "/m/a/b/leaf", false, false, true), // RFC: middle star
            (u("x"), "/m/a/leaf", false, true, false), // RFC: no trailing star, no subtree
            (u("root"), "/anything", true, true, true),
            (u("admin"), "/anything", true, true, true), // any holder of the root role
            (u("nobody"), "/pub/a", false, false, false), // unknown user
            (Anonymous, "/pub/a", false, false, true),
            (Anonymous, "/pub/a", true, false, false),
            (Anonymous, "/pub", false, true, false),
            (Anonymous, "/pub/a", false, true, true), // etcd ignores `recursive` for guest
            (BadCredentials, "/pub/a", false, false, false), // never falls back to guest
            (BadCredentials, "/r/a", false, false, false),
        ];
        let st = state();
        for (caller, key, write, rec, want) in &rows {
            assert_eq!(
                st.can_access(caller, key, *write, *rec),
                *want,
                "{caller:?} {key} w={write} rec={rec}"
            );
        }
        // Guest role removed: anonymous gets nothing.
        let mut no_guest = st.clone();
        no_guest.roles.remove("guest");
        assert!(!no_guest.can_access(&Anonymous, "/pub/a", false, false));
        // Auth disabled: everything, even bad credentials.
        let mut off = st.clone();
        off.enabled = false;
        for (caller, key, write, rec, _) in &rows {
            assert!(off.can_access(caller, key, *write, *rec));
        }
    }

    #[test]
    fn root_callers() {
        let st = state();
        assert!(st.is_root_caller(&Caller::User("root".into())));
        assert!(st.is_root_caller(&Caller::User("admin".into())));
        assert!(!st.is_root_caller(&Caller::User("r".into())));
        assert!(!st.is_root_caller(&Caller::Anonymous));
        assert!(!st.is_root_caller(&Caller::BadCredentials));
        assert!(
            AuthState::default().is_root_caller(&Caller::BadCredentials),
            "auth off"
        );
    }

    #[test]
    fn parse_basic_cases() {
        let some = |u: &str, p: &str| Some((u.to_string(), p.to_string()));
        let cases = [
            ("Basic cm9vdDpyb290", some("root", "root")),
            ("basic cm9vdDpyb290", some("root", "root")),
            ("BASIC cm9vdDpyb290", some("root", "root")),
            ("Basic dTpwOnE=", some("u", "p:q")),
            ("Basic OnA=", some("", "p")),
            ("Basic dTo=", some("u", "")),
            ("Basic dQ==", None),          // no colon
            ("Basic cm9vdDpyb290=", None), // bad length
            ("Basic cm9vd*pyb290", None),  // bad alphabet
            ("Basic dTo==", None),         // bad padding
            ("Basic dTp=", None),          // non-zero bits before padding
            ("Bearer cm9vdDpyb290", None),
            ("Basic", None),
            ("", None),
            ("Basic /w==", None), // not UTF-8
            ("Basicé", None),
        ];
        for (h, want) in cases {
            assert_eq!(parse_basic(h), want, "{h:?}");
        }
    }

    #[test]
    fn passwords_and_authenticate() {
        let h = hash_password("s3cret", MIN_BCRYPT_COST).unwrap();
        assert!(verify_password(&h, "s3cret"));
        assert!(!verify_password(&h, "nope"));
        assert!(!verify_password("not a hash", "s3cret"));
        assert!(hash_password("x", 99).is_err());
        let mut st = state();
        st.users.get_mut("r").unwrap().password_hash = h;
        let basic = |s: &str| format!("Basic {s}");
        assert_eq!(authenticate(&st, None), Caller::Anonymous);
        assert_eq!(authenticate(&st, Some("")), Caller::Anonymous);
        assert_eq!(
            authenticate(&st, Some(&basic("cjpzM2NyZXQ="))),
            Caller::User("r".into())
        ); // r:s3cret
        assert_eq!(
            authenticate(&st, Some(&basic("cjpub3Bl"))),
            Caller::BadCredentials
        ); // r:nope
        assert_eq!(
            authenticate(&st, Some(&basic("cTpzM2NyZXQ="))),
            Caller::BadCredentials
        ); // q:s3cret
        assert_eq!(authenticate(&st, Some("Basic !!")), Caller::BadCredentials);
    }
}
