//! Replicated changes (`AuthOp`) and the deterministic `AuthState::apply`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::AuthError;
use crate::model::{AuthState, GUEST_ROLE, ROOT_ROLE, ROOT_USER, Role, User};

/// A permission delta (grant or revoke) for the key-value resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermDelta {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
}

/// One change to the auth state, proposed through raft as JSON bytes
/// ([`AuthOp::encode`] / [`AuthOp::decode`]). Password fields hold bcrypt hashes:
/// hash before proposing (see [`crate::Plan::Propose`] and [`AuthOp::with_hash`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthOp {
    /// Needs a `root` user; creates the `guest` role (`/*` read and write) if absent.
    Enable,
    Disable,
    /// Create a user that must not exist. `strict` (the RFC API) also refuses
    /// unknown roles; etcd's `/v2/auth` accepts them.
    CreateUser {
        name: String,
        password_hash: String,
        roles: Vec<String>,
        #[serde(default)]
        strict: bool,
    },
    /// etcd's `PUT /v2/auth/users/NAME` without roles: update the password if the
    /// user exists, else create it (then a password is required).
    /// `roles_null`: the request had no `roles` at all (etcd then stores `null`).
    CreateOrUpdateUser {
        name: String,
        password_hash: Option<String>,
        #[serde(default)]
        roles_null: bool,
    },
    /// Change password and/or grant then revoke roles (all or nothing).
    UpdateUser {
        name: String,
        password_hash: Option<String>,
        #[serde(default)]
        grant: Vec<String>,
        #[serde(default)]
        revoke: Vec<String>,
        #[serde(default)]
        strict: bool,
    },
    DeleteUser {
        name: String,
    },
    /// Create a role that must not exist (`last_modified` is set from `now_ms`).
    CreateRole {
        role: Role,
    },
    /// Grant, then revoke, patterns (revoking an absent pattern is ignored).
    UpdateRole {
        name: String,
        grant: PermDelta,
        revoke: PermDelta,
    },
    DeleteRole {
        name: String,
    },
}

/// What a successful [`AuthState::apply`] reports, for rendering a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Enable, Disable, DeleteUser, DeleteRole.
    Done,
    /// The user after the change. `shown_roles` is the role list etcd 3.4 echoes
    /// in its reply (the request's roles in request order for a create, the
    /// sorted result for an update, where a revoked `root` stays out of the echo
    /// although the root user keeps it).
    User {
        user: User,
        created: bool,
        shown_roles: Vec<String>,
    },
    /// The role after the change, with its members (users holding it).
    Role {
        role: Role,
        created: bool,
        members: Vec<String>,
    },
}

impl AuthOp {
    /// JSON bytes to replicate.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<AuthOp, AuthError> {
        serde_json::from_slice(bytes).map_err(|e| AuthError::Decode(format!("op: {e}")))
    }

    /// Put a bcrypt hash into the op's password field (no-op for ops without one).
    pub fn with_hash(mut self, hash: String) -> AuthOp {
        match &mut self {
            AuthOp::CreateUser { password_hash, .. } => *password_hash = hash,
            AuthOp::CreateOrUpdateUser { password_hash, .. }
            | AuthOp::UpdateUser { password_hash, .. } => *password_hash = Some(hash),
            _ => {}
        }
        self
    }
}

fn check_patterns(list: &[String]) -> Result<(), AuthError> {
    if list.iter().any(|p| p.is_empty()) {
        Err(AuthError::EmptyPattern)
    } else {
        Ok(())
    }
}

impl AuthState {
    /// Apply one op. Deterministic: the result depends only on `self`, `op` and
    /// `now_ms`. On error the state is unchanged.
    pub fn apply(&mut self, op: &AuthOp, now_ms: u64) -> Result<Answer, AuthError> {
        match op {
            AuthOp::Enable => {
                if self.enabled {
                    return Err(AuthError::AlreadyEnabled);
                }
                if !self.users.contains_key(ROOT_USER) {
                    return Err(AuthError::NoRootUser);
                }
                if !self.roles.contains_key(GUEST_ROLE) {
                    self.roles
                        .insert(GUEST_ROLE.into(), Role::default_guest(now_ms));
                }
                self.enabled = true;
                Ok(Answer::Done)
            }
            AuthOp::Disable => {
                if !self.enabled {
                    return Err(AuthError::AlreadyDisabled);
                }
                self.enabled = false;
                Ok(Answer::Done)
            }
            AuthOp::CreateUser {
                name,
                password_hash,
                roles,
                strict,
            } => self.create_user(name, password_hash, roles, false, *strict, now_ms),
            AuthOp::CreateOrUpdateUser {
                name,
                password_hash,
                roles_null,
            } => {
                if self.users.contains_key(name) {
                    self.update_user(name, password_hash.as_deref(), &[], &[], false, now_ms)
                } else {
                    let hash = password_hash.as_deref().unwrap_or("");
                    let mut answer =
                        self.create_user(name, hash, &[], *roles_null, false, now_ms)?;
                    if let Answer::User { created, .. } = &mut answer {
                        *created = true;
                    }
                    Ok(answer)
                }
            }
            AuthOp::UpdateUser {
                name,
                password_hash,
                grant,
                revoke,
                strict,
            } => self.update_user(
                name,
                password_hash.as_deref(),
                grant,
                revoke,
                *strict,
                now_ms,
            ),
            AuthOp::DeleteUser { name } => {
                if self.enabled && name == ROOT_USER {
                    return Err(AuthError::DeleteRootWhileEnabled);
                }
                match self.users.remove(name) {
                    Some(_) => Ok(Answer::Done),
                    None => Err(AuthError::DeleteUserNotFound(name.clone())),
                }
            }
            AuthOp::CreateRole { role } => {
                if role.name == ROOT_ROLE {
                    return Err(AuthError::RootRoleImmutable);
                }
                if self.roles.contains_key(&role.name) {
                    return Err(AuthError::RoleExists(role.name.clone()));
                }
                check_patterns(&role.read)?;
                check_patterns(&role.write)?;
                let mut role = role.clone();
                role.last_modified = now_ms;
                self.roles.insert(role.name.clone(), role.clone());
                let members = self.members(&role.name);
                Ok(Answer::Role {
                    role,
                    created: true,
                    members,
                })
            }
            AuthOp::UpdateRole {
                name,
                grant,
                revoke,
            } => {
                if name == ROOT_ROLE {
                    return Err(AuthError::RootRoleImmutable);
                }
                let old = self
                    .roles
                    .get(name)
                    .ok_or_else(|| AuthError::RoleNotFound(name.clone()))?;
                check_patterns(&grant.read)?;
                check_patterns(&grant.write)?;
                let read = merge_perms(&old.read, &grant.read, &revoke.read, false)?;
                let write = merge_perms(&old.write, &grant.write, &revoke.write, true)?;
                // etcd compares old and new with reflect.DeepEqual, where a never-set
                // (nil) list differs from an empty one.
                if !old.read_unset && !old.write_unset && old.read == read && old.write == write {
                    return Err(AuthError::RoleNotUpdated);
                }
                let role = Role {
                    name: name.clone(),
                    read,
                    write,
                    last_modified: now_ms,
                    read_unset: false,
                    write_unset: false,
                };
                self.roles.insert(name.clone(), role.clone());
                let members = self.members(name);
                Ok(Answer::Role {
                    role,
                    created: false,
                    members,
                })
            }
            AuthOp::DeleteRole { name } => {
                if name == ROOT_ROLE {
                    return Err(AuthError::RootRoleImmutable);
                }
                match self.roles.remove(name) {
                    Some(_) => Ok(Answer::Done),
                    None => Err(AuthError::DeleteRoleNotFound(name.clone())),
                }
            }
        }
    }

    fn create_user(
        &mut self,
        name: &str,
        password_hash: &str,
        roles: &[String],
        roles_null: bool,
        strict: bool,
        now_ms: u64,
    ) -> Result<Answer, AuthError> {
        if password_hash.is_empty() {
            return Err(AuthError::EmptyPassword(name.to_string()));
        }
        if self.users.contains_key(name) {
            return Err(AuthError::UserExists(name.to_string()));
        }
        if strict && let Some(r) = roles.iter().find(|r| self.role(r).is_none()) {
            return Err(AuthError::GrantUnknownRole(r.clone()));
        }
        let mut shown_roles = roles.to_vec();
        if name == ROOT_USER && !shown_roles.iter().any(|r| r == ROOT_ROLE) {
            shown_roles.push(ROOT_ROLE.to_string());
        }
        let sorted_unique = shown_roles.windows(2).all(|w| w[0] < w[1]);
        let user = User {
            name: name.to_string(),
            password_hash: password_hash.to_string(),
            roles: shown_roles.iter().cloned().collect(),
            last_modified: now_ms,
            roles_uncanonical: (roles_null && shown_roles.is_empty()) || !sorted_unique,
        };
        self.users.insert(name.to_string(), user.clone());
        Ok(Answer::User {
            user,
            created: false,
            shown_roles,
        })
    }

    fn update_user(
        &mut self,
        name: &str,
        password_hash: Option<&str>,
        grant: &[String],
        revoke: &[String],
        strict: bool,
        now_ms: u64,
    ) -> Result<Answer, AuthError> {
        let old = self
            .users
            .get(name)
            .ok_or_else(|| AuthError::UserNotFound(name.to_string()))?;
        let mut roles: BTreeSet<String> = old.roles.clone();
        for g in grant {
            if strict && self.role(g).is_none() {
                return Err(AuthError::GrantUnknownRole(g.clone()));
            }
            if !roles.insert(g.clone()) {
                return Err(AuthError::DuplicateRoleGrant {
                    role: g.clone(),
                    user: name.to_string(),
                });
            }
        }
        for r in revoke {
            if strict && name == ROOT_USER && r == ROOT_ROLE {
                return Err(AuthError::RevokeRootFromRoot);
            }
            if !roles.remove(r) {
                return Err(AuthError::UngrantedRoleRevoke {
                    role: r.clone(),
                    user: name.to_string(),
                });
            }
        }
        let password_hash = password_hash.filter(|h| !h.is_empty());
        if password_hash.is_none() && roles == old.roles && !old.roles_uncanonical {
            return Err(AuthError::UserNotUpdated);
        }
        let shown_roles: Vec<String> = roles.iter().cloned().collect();
        if name == ROOT_USER {
            // The root user always holds the root role (etcd re-attaches it on every read).
            roles.insert(ROOT_ROLE.to_string());
        }
        let user = User {
            name: name.to_string(),
            password_hash: password_hash
                .map(str::to_string)
                .unwrap_or_else(|| old.password_hash.clone()),
            roles,
            last_modified: now_ms,
            roles_uncanonical: false,
        };
        self.users.insert(name.to_string(), user.clone());
        Ok(Answer::User {
            user,
            created: false,
            shown_roles,
        })
    }
}

/// etcd's RWPermission Grant then Revoke for one list: duplicate grants refused,
/// absent revokes ignored, result sorted and deduplicated.
fn merge_perms(
    old: &[String],
    grant: &[String],
    revoke: &[String],
    write: bool,
) -> Result<Vec<String>, AuthError> {
    let mut set: BTreeSet<String> = old.iter().cloned().collect();
    for g in grant {
        if !set.insert(g.clone()) {
            return Err(if write {
                AuthError::DuplicateWritePermission(g.clone())
            } else {
                AuthError::DuplicateReadPermission(g.clone())
            });
        }
    }
    for r in revoke {
        set.remove(r);
    }
    Ok(set.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn create(name: &str, roles: &[&str]) -> AuthOp {
        AuthOp::CreateUser {
            name: name.into(),
            password_hash: format!("hash-{name}"),
            roles: s(roles),
            strict: false,
        }
    }

    fn update(
        name: &str,
        pw: Option<&str>,
        grant: &[&str],
        revoke: &[&str],
        strict: bool,
    ) -> AuthOp {
        AuthOp::UpdateUser {
            name: name.into(),
            password_hash: pw.map(str::to_string),
            grant: s(grant),
            revoke: s(revoke),
            strict,
        }
    }

    fn role(name: &str, read: &[&str], write: &[&str]) -> AuthOp {
        AuthOp::CreateRole {
            role: Role::new(name, s(read), s(write)),
        }
    }

    fn update_role(name: &str, gr: &[&str], gw: &[&str], rr: &[&str], rw: &[&str]) -> AuthOp {
        AuthOp::UpdateRole {
            name: name.into(),
            grant: PermDelta {
                read: s(gr),
                write: s(gw),
            },
            revoke: PermDelta {
                read: s(rr),
                write: s(rw),
            },
        }
    }

    /// Every op and every refusal, in sequence: (op, Ok(()) or the exact error).
    #[test]
    fn ops_and_errors_in_sequence() {
        use AuthError as E;
        let steps: Vec<(AuthOp, Result<(), AuthError>)> = vec![
            (AuthOp::Disable, Err(E::AlreadyDisabled)),
            (AuthOp::Enable, Err(E::NoRootUser)),
            (
                AuthOp::CreateUser {
                    name: "a".into(),
                    password_hash: String::new(),
                    roles: vec![],
                    strict: false,
                },
                Err(E::EmptyPassword("a".into())),
            ),
            (
                AuthOp::CreateOrUpdateUser {
                    name: "a".into(),
                    password_hash: None,
                    roles_null: true,
                },
                Err(E::EmptyPassword("a".into())),
            ),
            (create("root", &[]), Ok(())),
            (create("root", &[]), Err(E::UserExists("root".into()))),
            (create("alice", &["ghost"]), Ok(())), // etcd: unknown roles are fine here
            (
                AuthOp::CreateUser {
                    name: "bob".into(),
                    password_hash: "h".into(),
                    roles: s(&["ghost"]),
                    strict: true,
                },
                Err(E::GrantUnknownRole("ghost".into())),
            ),
            (
                update("nobody", Some("h"), &[], &[], false),
                Err(E::UserNotFound("nobody".into())),
            ),
            (
                update("alice", None, &[], &[], false),
                Err(E::UserNotUpdated),
            ),
            (
                update("alice", None, &["ghost"], &[], false),
                Err(E::DuplicateRoleGrant {
                    role: "ghost".into(),
                    user: "alice".into(),
                }),
            ),
            (
                update("alice", None, &[], &["x"], false),
                Err(E::UngrantedRoleRevoke {
                    role: "x".into(),
                    user: "alice".into(),
                }),
            ),
            (
                update("alice", None, &["r1"], &[], true),
                Err(E::GrantUnknownRole("r1".into())),
            ),
            (update("alice", None, &["r1"], &["ghost"], false), Ok(())),
            (update("alice", Some("new"), &[], &[], false), Ok(())),
            (
                update("root", None, &[], &["root"], true),
                Err(E::RevokeRootFromRoot),
            ),
            (role("root", &[], &[]), Err(E::RootRoleImmutable)),
            (
                AuthOp::CreateRole {
                    role: Role {
                        write_unset: true,
                        ..Role::new("r1", s(&["/a"]), vec![])
                    },
                },
                Ok(()),
            ),
            (role("r1", &[], &[]), Err(E::RoleExists("r1".into()))),
            (role("r2", &[""], &[]), Err(E::EmptyPattern)),
            (
                update_role("root", &["/x"], &[], &[], &[]),
                Err(E::RootRoleImmutable),
            ),
            (
                update_role("zz", &["/x"], &[], &[], &[]),
                Err(E::RoleNotFound("zz".into())),
            ),
            (
                update_role("r1", &["/a"], &[], &[], &[]),
                Err(E::DuplicateReadPermission("/a".into())),
            ),
            (
                update_role("r1", &[], &["/w", "/w"], &[], &[]),
                Err(E::DuplicateWritePermission("/w".into())),
            ),
            (
                update_role("r1", &[""], &[], &[], &[]),
                Err(E::EmptyPattern),
            ),
            (update_role("r1", &[], &[], &["/nothere"], &[]), Ok(())), // write list was never set: etcd updates
            (
                update_role("r1", &[], &[], &["/nothere"], &[]),
                Err(E::RoleNotUpdated),
            ),
            (update_role("r1", &["/b"], &["/w"], &["/a"], &[]), Ok(())),
            (
                AuthOp::DeleteRole {
                    name: "root".into(),
                },
                Err(E::RootRoleImmutable),
            ),
            (
                AuthOp::DeleteRole { name: "zz".into() },
                Err(E::DeleteRoleNotFound("zz".into())),
            ),
            (AuthOp::Enable, Ok(())),
            (AuthOp::Enable, Err(E::AlreadyEnabled)),
            (
                AuthOp::DeleteUser {
                    name: "root".into(),
                },
                Err(E::DeleteRootWhileEnabled),
            ),
            (
                AuthOp::DeleteUser { name: "zz".into() },
                Err(E::DeleteUserNotFound("zz".into())),
            ),
            (
                AuthOp::DeleteUser {
                    name: "alice".into(),
                },
                Ok(()),
            ),
            (
                AuthOp::DeleteRole {
                    name: "guest".into(),
                },
                Ok(()),
            ),
            (AuthOp::Disable, Ok(())),
            (
                AuthOp::DeleteUser {
                    name: "root".into(),
                },
                Ok(()),
            ),
        ];
        let mut st = AuthState::new();
        for (i, (op, want)) in steps.iter().enumerate() {
            let before = st.clone();
            let got = st.apply(op, 100 + i as u64).map(|_| ());
            assert_eq!(&got, want, "step {i}: {op:?}");
            if got.is_err() {
                assert_eq!(st, before, "step {i}: state changed on error");
            }
        }
        assert_eq!(
            st.role("r1").map(|r| (r.read, r.write)),
            Some((s(&["/b"]), s(&["/w"])))
        );
        assert!(st.users.is_empty());
        assert!(!st.enabled);
    }

    #[test]
    fn error_statuses_match_etcd() {
        use AuthError as E;
        let cases = [
            (E::AlreadyEnabled, 409, "auth: already enabled"),
            (E::AlreadyDisabled, 409, "auth: already disabled"),
            (
                E::NoRootUser,
                409,
                "auth: No root user available, please create one",
            ),
            (
                E::EmptyPassword("u".into()),
                400,
                "auth: Cannot create user u with an empty password",
            ),
            (
                E::UserExists("u".into()),
                409,
                "auth: User u already exists.",
            ),
            (
                E::UserNotFound("u".into()),
                404,
                "auth: User u does not exist.",
            ),
            (
                E::DeleteUserNotFound("u".into()),
                404,
                "auth: User u does not exist",
            ),
            (
                E::DeleteRootWhileEnabled,
                403,
                "auth: Cannot delete root user while auth is enabled.",
            ),
            (
                E::UserNotUpdated,
                400,
                "auth: User not updated. Use grant/revoke/password to update the user.",
            ),
            (
                E::RootRoleImmutable,
                403,
                "auth: Cannot modify role root: is root role.",
            ),
            (
                E::RoleExists("r".into()),
                409,
                "auth: Role r already exists.",
            ),
            (
                E::RoleNotFound("r".into()),
                404,
                "auth: Role r does not exist.",
            ),
            (
                E::DeleteRoleNotFound("r".into()),
                404,
                "auth: Role r doesn't exist.",
            ),
            (
                E::RoleNotUpdated,
                400,
                "auth: Role not updated. Use grant/revoke to update the role.",
            ),
            (
                E::DuplicateReadPermission("/p".into()),
                409,
                "auth: Granting duplicate read permission /p",
            ),
            (
                E::DuplicateWritePermission("/p".into()),
                409,
                "auth: Granting duplicate write permission /p",
            ),
        ];
        for (e, status, text) in cases {
            assert_eq!((e.status(), e.to_string()), (status, text.to_string()));
            assert!(e.name().starts_with("Err"));
        }
    }

    #[test]
    fn builtins() {
        let mut st = AuthState::new();
        // Root role always exists and is listed, never stored.
        assert_eq!(st.role("root"), Some(Role::root()));
        assert_eq!(st.role_names(), s(&["root"]));
        // Root user gets the root role whatever it asked for.
        let a = st.apply(&create("root", &["guest"]), 5).unwrap();
        assert!(
            matches!(&a, Answer::User { shown_roles, .. } if *shown_roles == s(&["guest", "root"]))
        );
        assert!(st.users["root"].roles.contains("root"));
        // Enable creates guest with /* read and write, once.
        st.apply(&AuthOp::Enable, 6).unwrap();
        assert_eq!(st.roles["guest"], Role::default_guest(6));
        st.apply(&update_role("guest", &[], &[], &[], &["/*"]), 7)
            .unwrap();
        st.apply(&AuthOp::Disable, 8).unwrap();
        st.apply(&AuthOp::Enable, 9).unwrap();
        assert_eq!(
            st.roles["guest"].write,
            Vec::<String>::new(),
            "existing guest kept"
        );
        // etcd 3.4 lets /v2/auth revoke root from root (200, echo without root); the
        // user keeps it, as etcd re-attaches it on every read.
        let a = st
            .apply(&update("root", None, &[], &["root"], false), 10)
            .unwrap();
        assert!(matches!(&a, Answer::User { shown_roles, .. } if *shown_roles == s(&["guest"])));
        assert!(st.user_is_root("root"));
        // A password-only change keeps roles; timestamps follow the op's now.
        st.apply(&update("root", Some("h2"), &[], &[], false), 11)
            .unwrap();
        assert_eq!(
            (
                st.users["root"].password_hash.as_str(),
                st.users["root"].last_modified
            ),
            ("h2", 11)
        );
    }

    #[test]
    fn uncanonical_role_lists_allow_one_noop_update() {
        let mut st = AuthState::new();
        let c = |n: &str, null| AuthOp::CreateOrUpdateUser {
            name: n.into(),
            password_hash: Some("h".into()),
            roles_null: null,
        };
        let noop = |n: &str| AuthOp::CreateOrUpdateUser {
            name: n.into(),
            password_hash: None,
            roles_null: true,
        };
        st.apply(&c("nullroles", true), 1).unwrap();
        st.apply(&c("emptyroles", false), 1).unwrap();
        st.apply(&create("unsorted", &["b", "a"]), 1).unwrap();
        st.apply(&create("sorted", &["a", "b"]), 1).unwrap();
        for (name, first_ok) in [
            ("nullroles", true),
            ("emptyroles", false),
            ("unsorted", true),
            ("sorted", false),
        ] {
            assert_eq!(st.apply(&noop(name), 2).is_ok(), first_ok, "{name}");
            assert_eq!(
                st.apply(&noop(name), 3),
                Err(AuthError::UserNotUpdated),
                "{name}"
            );
        }
    }

    #[test]
    fn op_json_round_trip_and_with_hash() {
        let ops = vec![
            AuthOp::Enable,
            AuthOp::Disable,
            create("u", &["a"]),
            AuthOp::CreateOrUpdateUser {
                name: "u".into(),
                password_hash: None,
                roles_null: true,
            },
            update("u", Some("h"), &["a"], &["b"], true),
            AuthOp::DeleteUser { name: "u".into() },
            role("r", &["/a*"], &["/b"]),
            update_role("r", &["/x"], &[], &[], &["/y"]),
            AuthOp::DeleteRole { name: "r".into() },
        ];
        for op in ops {
            assert_eq!(AuthOp::decode(&op.encode()), Ok(op.clone()));
            let hashed = op.clone().with_hash("H".into());
            match hashed {
                AuthOp::CreateUser { password_hash, .. } => assert_eq!(password_hash, "H"),
                AuthOp::CreateOrUpdateUser { password_hash, .. }
                | AuthOp::UpdateUser { password_hash, .. } => {
                    assert_eq!(password_hash.as_deref(), Some("H"))
                }
                other => assert_eq!(other, op),
            }
        }
        assert!(AuthOp::decode(b"{\"Nope\":{}}").is_err());
    }

    #[test]
    fn determinism_same_ops_same_state() {
        let ops = [
            create("root", &[]),
            role("r", &["/a"], &[]),
            update("root", None, &["r"], &[], false),
            AuthOp::Enable,
        ];
        let mut a = AuthState::new();
        let mut b = AuthState::recover(&AuthState::new().save()).unwrap();
        for (i, op) in ops.iter().enumerate() {
            let ra = a.apply(op, i as u64);
            let rb = b.apply(&AuthOp::decode(&op.encode()).unwrap(), i as u64);
            assert_eq!(ra, rb);
        }
        assert_eq!(a, b);
        assert_eq!(a.save(), b.save());
    }
}
