//! The state: users, roles, the enabled flag; built-in roles; snapshots.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::AuthError;

/// Name of the built-in role with every right.
pub const ROOT_ROLE: &str = "root";
/// Name of the user that must exist before auth can be enabled.
pub const ROOT_USER: &str = "root";
/// Name of the role anonymous requests get.
pub const GUEST_ROLE: &str = "guest";
/// Version written by [`AuthState::save`].
pub const SNAPSHOT_VERSION: u32 = 1;

/// A user. `password_hash` is a bcrypt hash (never the password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    pub password_hash: String,
    pub roles: BTreeSet<String>,
    /// Milliseconds since the Unix epoch, from the `now_ms` of the last op that changed it.
    pub last_modified: u64,
    /// etcd keeps a user's role list as given at creation (possibly `null`,
    /// unsorted, or with duplicates) until the first update sorts it, and its
    /// "User not updated" check compares lists, so a no-op update of such a user
    /// succeeds once. True while the list etcd would hold is not yet canonical.
    #[serde(default, skip_serializing_if = "is_false")]
    pub roles_uncanonical: bool,
}

/// A role: read and write key patterns (see [`crate::glob`]).
///
/// The lists keep the order they were created with; any successful update
/// rewrites them sorted and without duplicates (what etcd does). `read_unset` /
/// `write_unset` remember a list that was never given (etcd prints `null` for
/// it on `/v2/auth` until the role is first updated); they do not affect access.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    pub name: String,
    pub read: Vec<String>,
    pub write: Vec<String>,
    pub last_modified: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_unset: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub write_unset: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Role {
    /// A role with the given lists (both "set", even if empty).
    pub fn new(name: &str, read: Vec<String>, write: Vec<String>) -> Role {
        Role {
            name: name.to_string(),
            read,
            write,
            last_modified: 0,
            read_unset: false,
            write_unset: false,
        }
    }

    /// The built-in root role (`/*` read and write; in fact everything).
    pub fn root() -> Role {
        Role::new(ROOT_ROLE, vec!["/*".into()], vec!["/*".into()])
    }

    /// The guest role created when auth is enabled and none exists.
    pub fn default_guest(now_ms: u64) -> Role {
        let mut r = Role::new(GUEST_ROLE, vec!["/*".into()], vec!["/*".into()]);
        r.last_modified = now_ms;
        r
    }

    /// May this role touch `key`? Root: always. `recursive`: a pattern must cover
    /// the key's whole subtree. Write rights never imply read rights.
    pub fn has_access(&self, key: &str, write: bool, recursive: bool) -> bool {
        if self.name == ROOT_ROLE {
            return true;
        }
        let list = if write { &self.write } else { &self.read };
        list.iter().any(|p| {
            !p.is_empty()
                && if recursive {
                    crate::glob::glob_covers_subtree(p, key)
                } else {
                    crate::glob::glob_match(p, key)
                }
        })
    }
}

/// All of v2 auth's replicated state. Change it only through
/// [`AuthState::apply`]; read it freely.
///
/// Invariants: `roles` never holds `root` (the built-in is synthesised by
/// [`AuthState::role`]); the `root` user, if any, always holds the `root` role;
/// `enabled` implies a `root` user exists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthState {
    pub enabled: bool,
    pub users: BTreeMap<String, User>,
    pub roles: BTreeMap<String, Role>,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    version: u32,
    state: AuthState,
}

impl AuthState {
    /// Fresh state: auth disabled, no users, only the built-in root role.
    pub fn new() -> AuthState {
        AuthState::default()
    }

    /// A role by name; `root` is the built-in.
    pub fn role(&self, name: &str) -> Option<Role> {
        if name == ROOT_ROLE {
            return Some(Role::root());
        }
        self.roles.get(name).cloned()
    }

    /// Role names as etcd lists them: stored roles plus `root`, sorted.
    pub fn role_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.roles.keys().cloned().collect();
        names.push(ROOT_ROLE.to_string());
        names.sort();
        names
    }

    /// Users holding `role`, sorted.
    pub fn members(&self, role: &str) -> Vec<String> {
        self.users
            .values()
            .filter(|u| u.roles.contains(role))
            .map(|u| u.name.clone())
            .collect()
    }

    /// Does user `name` exist and hold the root role?
    pub fn user_is_root(&self, name: &str) -> bool {
        self.users
            .get(name)
            .is_some_and(|u| u.roles.contains(ROOT_ROLE))
    }

    /// Versioned JSON snapshot: `{"version":1,"state":{...}}`.
    pub fn save(&self) -> Vec<u8> {
        let snap = Snapshot {
            version: SNAPSHOT_VERSION,
            state: self.clone(),
        };
        // Serialising plain maps of strings cannot fail.
        serde_json::to_vec(&snap).unwrap_or_default()
    }

    /// Read a snapshot written by [`AuthState::save`]; checks version and invariants.
    pub fn recover(bytes: &[u8]) -> Result<AuthState, AuthError> {
        let snap: Snapshot = serde_json::from_slice(bytes)
            .map_err(|e| AuthError::Decode(format!("snapshot: {e}")))?;
        if snap.version != SNAPSHOT_VERSION {
            return Err(AuthError::Decode(format!(
                "snapshot: unknown version {}",
                snap.version
            )));
        }
        let state = snap.state;
        if state.roles.contains_key(ROOT_ROLE) {
            return Err(AuthError::Decode("snapshot: stored root role".into()));
        }
        for (k, u) in &state.users {
            if *k != u.name || (k == ROOT_USER && !u.roles.contains(ROOT_ROLE)) {
                return Err(AuthError::Decode(format!("snapshot: bad user {k}")));
            }
        }
        for (k, r) in &state.roles {
            if *k != r.name {
                return Err(AuthError::Decode(format!("snapshot: bad role {k}")));
            }
        }
        if state.enabled && !state.users.contains_key(ROOT_USER) {
            return Err(AuthError::Decode(
                "snapshot: enabled without a root user".into(),
            ));
        }
        Ok(state)
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2015-02-05T18:00:00.000Z`.
pub fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let milli = ms % 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_423_159_200_000, "2015-02-05T18:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (4_107_542_399_999, "2100-02-28T23:59:59.999Z"),
            (1_767_225_599_000, "2025-12-31T23:59:59.000Z"),
        ];
        for (ms, want) in cases {
            assert_eq!(rfc3339_ms(ms), want);
        }
        // Largest input does not panic.
        let _ = rfc3339_ms(u64::MAX);
    }

    #[test]
    fn recover_rejects_garbage_and_bad_invariants() {
        assert!(AuthState::recover(b"").is_err());
        assert!(
            AuthState::recover(
                b"{\"version\":2,\"state\":{\"enabled\":false,\"users\":{},\"roles\":{}}}"
            )
            .is_err()
        );
        assert!(
            AuthState::recover(
                b"{\"version\":1,\"state\":{\"enabled\":true,\"users\":{},\"roles\":{}}}"
            )
            .is_err()
        );
        let ok = AuthState::recover(
            b"{\"version\":1,\"state\":{\"enabled\":false,\"users\":{},\"roles\":{}}}",
        );
        assert_eq!(ok, Ok(AuthState::new()));
    }
}
