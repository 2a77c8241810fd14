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
