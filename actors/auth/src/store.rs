//! [`AuthStore`]: users, roles, the enabled flag and the auth revision, applied from the log.

use std::collections::{BTreeMap, HashMap};

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::authpb::{Role, User};
use actcd_proto::etcdserverpb as pb;
use actcd_types::error::MAX_AUTH_NAME_BYTES;
use actcd_types::msg::AuthReply;
use actcd_types::storage::{ReadTxn, StorageError, Table, WriteTxn};
use actcd_types::{AuthInfo, EtcdError};
use base64::Engine;
use prost::Message;

use actcd_authz::{AuthView, Perm, UserEntry, UserPerms};
use actcd_types::auth::SharedView;

/// `auth` table keys, as etcd names them.
const ENABLED_KEY: &[u8] = b"authEnabled";
const REVISION_KEY: &[u8] = b"authRevision";
/// etcd's root user and root role: exactly these four bytes.
const ROOT: &[u8] = b"root";

/// An auth request taken out of a log entry.
#[derive(Debug, Clone)]
pub enum AuthRequest {
    Enable,
    Disable,
    Status,
    Authenticate { name: Vec<u8>, simple_token: String },
    UserAdd(pb::AuthUserAddRequest),
    UserDelete(pb::AuthUserDeleteRequest),
    UserGet(pb::AuthUserGetRequest),
    UserList,
    UserChangePassword(pb::AuthUserChangePasswordRequest),
    UserGrantRole(pb::AuthUserGrantRoleRequest),
    UserRevokeRole(pb::AuthUserRevokeRoleRequest),
    RoleAdd(pb::AuthRoleAddRequest),
    RoleGet(pb::AuthRoleGetRequest),
    RoleList,
    RoleDelete(pb::AuthRoleDeleteRequest),
    RoleGrantPermission(pb::AuthRoleGrantPermissionRequest),
    RoleRevokePermission(pb::AuthRoleRevokePermissionRequest),
}

impl AuthRequest {
    /// Takes the auth request out of `req`, if it carries one.
    pub fn take(req: &mut InternalRaftRequest) -> Option<AuthRequest> {
        use AuthRequest::*;
        Some(if req.auth_enable.take().is_some() {
            Enable
        } else if req.auth_disable.take().is_some() {
            Disable
        } else if req.auth_status.take().is_some() {
            Status
        } else if let Some(a) = req.authenticate.take() {
            Authenticate {
                name: a.name,
                simple_token: a.simple_token,
            }
        } else if let Some(r) = req.auth_user_add.take() {
            UserAdd(r)
        } else if let Some(r) = req.auth_user_delete.take() {
            UserDelete(r)
        } else if let Some(r) = req.auth_user_get.take() {
            UserGet(r)
        } else if req.auth_user_list.take().is_some() {
            UserList
        } else if let Some(r) = req.auth_user_change_password.take() {
            UserChangePassword(r)
        } else if let Some(r) = req.auth_user_grant_role.take() {
            UserGrantRole(r)
        } else if let Some(r) = req.auth_user_revoke_role.take() {
            UserRevokeRole(r)
        } else if let Some(r) = req.auth_role_add.take() {
            RoleAdd(r)
        } else if let Some(r) = req.auth_role_get.take() {
            RoleGet(r)
        } else if req.auth_role_list.take().is_some() {
            RoleList
        } else if let Some(r) = req.auth_role_delete.take() {
            RoleDelete(r)
        } else if let Some(r) = req.auth_role_grant_permission.take() {
            RoleGrantPermission(r)
        } else if let Some(r) = req.auth_role_revoke_permission.take() {
            RoleRevokePermission(r)
        } else {
            return None;
        })
    }

    /// The user whose tokens end when this request applies (deleted, or a new password).
    pub fn invalidated_user(&self) -> Option<Vec<u8>> {
        match self {
            AuthRequest::UserDelete(r) => Some(r.name.clone()),
            AuthRequest::UserChangePassword(r) => Some(r.name.clone()),
            _ => None,
        }
    }

    /// etcd's `needAdminPermission`: requests only the root role may make.
    /// Every auth request but a login, a user's or role's own get (judged as applied) and,
    /// since etcd 3.7.0 (#20802), AuthStatus, which anyone may ask.
    fn needs_admin(&self) -> bool {
        use AuthRequest::*;
        !matches!(self, Authenticate { .. } | UserGet(_) | RoleGet(_) | Status)
    }
}

/// The auth state machine (etcd's `authStore` without tokens, which the front keeps).
#[derive(Debug, Clone)]
pub struct AuthStore {
    enabled: bool,
    revision: u64,
    users: BTreeMap<Vec<u8>, User>,
    roles: BTreeMap<Vec<u8>, Role>,
    /// The enabled flag, the revision and the merged permissions per user, rebuilt whenever a
    /// user or a role changes: what the checks read and what gets published.
    view: AuthView,
}

impl AuthStore {
    /// Loads the auth tables. A store that never changed has revision 1, as etcd's starts.
    pub fn open<R: ReadTxn + ?Sized>(txn: &R) -> Result<AuthStore, StorageError> {
        let enabled = txn.get(Table::Auth, ENABLED_KEY)?.as_deref() == Some(&[1u8][..]);
        let revision = match txn.get(Table::Auth, REVISION_KEY)? {
            Some(v) => u64::from_be_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| StorageError("auth: bad revision record".into()))?,
            ),
            None => 1,
        };
        let mut users = BTreeMap::new();
        let mut roles = BTreeMap::new();
        let mut bad = None;
        txn.scan(Table::AuthUsers, &[], None, &mut |k, v| {
            match User::decode(v) {
                Ok(u) => {
                    users.insert(k.to_vec(), u);
                }
                Err(e) => bad = Some(e.to_string()),
            }
            bad.is_none()
        })?;
        txn.scan(Table::AuthRoles, &[], None, &mut |k, v| {
            match Role::decode(v) {
                Ok(r) => {
                    roles.insert(k.to_vec(), r);
                }
                Err(e) => bad = Some(e.to_string()),
            }
            bad.is_none()
        })?;
        if let Some(e) = bad {
            return Err(StorageError(format!("auth: bad user or role record: {e}")));
        }
        let mut store = AuthStore {
            enabled,
            revision: revision.max(1),
            users,
            roles,
            view: AuthView::new(enabled, revision.max(1), HashMap::new()),
        };
        store.rebuild_all();
        Ok(store)
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    fn rebuild(&mut self, name: &[u8]) {
        match self.users.get(name) {
            Some(u) => {
                let entry = UserEntry {
                    is_root: u.roles.iter().any(|r| r == ROOT),
                    perms: UserPerms::build(u.roles.iter().filter_map(|r| self.roles.get(r))),
                };
                self.view.set_user(name.to_vec(), entry);
            }
            None => self.view.remove_user(name),
        }
    }

    fn rebuild_all(&mut self) {
        let names: Vec<Vec<u8>> = self.users.keys().cloned().collect();
        self.view.clear_users();
        for n in names {
            self.rebuild(&n);
        }
    }

    fn is_root(&self, name: &[u8]) -> bool {
        self.view.user(name).is_some_and(|u| u.is_root)
    }

    /// The checks as of now (what [`Self::publish`] would hand out).
    pub fn view(&self) -> &AuthView {
        &self.view
    }

    /// The current state as an immutable view for the applier and the front.
    pub fn publish(&self) -> SharedView {
        self.view.clone().shared()
    }

    /// etcd's `IsAdminPermitted`.
    pub fn check_admin(&self, who: &AuthInfo) -> Result<(), EtcdError> {
        self.view.check_admin(who)
    }

    /// etcd's `isOpPermitted`: may `who` do `perm` on `[key, range_end)` now?
    pub fn check_range(
        &self,
        who: &AuthInfo,
        key: &[u8],
        range_end: &[u8],
        perm: Perm,
    ) -> Result<(), EtcdError> {
        self.view.check_range(who, key, range_end, perm)
    }

    /// etcd's auth applier's checks of a key-space request (see [`AuthView::check_request`]).
    pub fn check_request(
        &self,
        who: &AuthInfo,
        req: &InternalRaftRequest,
        lease_keys: &dyn Fn(i64) -> Vec<Vec<u8>>,
    ) -> Result<(), EtcdError> {
        self.view.check_request(who, req, lease_keys)
    }

    /// A user's bcrypt hash and the revision it was read at, for Authenticate's check.
    pub fn password_of(&self, name: &[u8]) -> Result<(Vec<u8>, u64), EtcdError> {
        if !self.enabled {
            return Err(EtcdError::AuthNotEnabled);
        }
        let user = self.users.get(name).ok_or(EtcdError::AuthFailed)?;
        if user.options.as_ref().is_some_and(|o| o.no_password) {
            return Err(EtcdError::NoPasswordUser);
        }
        Ok((user.password.clone(), self.revision))
    }

    fn commit_revision<W: WriteTxn + ?Sized>(&mut self, txn: &mut W) -> Result<(), StorageError> {
        self.revision += 1;
        self.view.set_revision(self.revision);
        txn.put(Table::Auth, REVISION_KEY, &self.revision.to_be_bytes())
    }

    fn put_user<W: WriteTxn + ?Sized>(&mut self, txn: &mut W, u: User) -> Result<(), StorageError> {
        let name = u.name.clone();
        txn.put(Table::AuthUsers, &name, &u.encode_to_vec())?;
        self.users.insert(name.clone(), u);
        self.rebuild(&name);
        Ok(())
    }

    fn put_role<W: WriteTxn + ?Sized>(&mut self, txn: &mut W, r: Role) -> Result<(), StorageError> {
        let name = r.name.clone();
        txn.put(Table::AuthRoles, &name, &r.encode_to_vec())?;
        self.roles.insert(name, r);
        self.rebuild_all();
        Ok(())
    }

    /// Applies one auth request as `who`. The outer error is the engine's (the batch fails);
    /// the inner one is etcd's refusal, which changes nothing.
    pub fn apply<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        who: &AuthInfo,
        req: AuthRequest,
    ) -> Result<Result<AuthReply, EtcdError>, StorageError> {
        if req.needs_admin()
            && let Err(e) = self.check_admin(who)
        {
            return Ok(Err(e));
        }
        self.apply_checked(txn, who, req)
    }

    fn apply_checked<W: WriteTxn + ?Sized>(
        &mut self,
        txn: &mut W,
        who: &AuthInfo,
        req: AuthRequest,
    ) -> Result<Result<AuthReply, EtcdError>, StorageError> {
        use AuthRequest as R;
        let refuse = |e| Ok(Err(e));
        let reply = match req {
            R::Enable => {
                if !self.enabled {
                    if !self.users.contains_key(ROOT) {
                        return refuse(EtcdError::RootUserNotExist);
                    }
                    if !self.is_root(ROOT) {
                        return refuse(EtcdError::RootRoleNotExist);
                    }
                    txn.put(Table::Auth, ENABLED_KEY, &[1])?;
                    self.enabled = true;
                    self.view.set_enabled(true);
                }
                AuthReply::Enable(Default::default())
            }
            R::Disable => {
                if self.enabled {
                    txn.put(Table::Auth, ENABLED_KEY, &[0])?;
                    self.commit_revision(txn)?;
                    self.enabled = false;
                    self.view.set_enabled(false);
                }
                AuthReply::Disable(Default::default())
            }
            R::Status => AuthReply::Status(pb::AuthStatusResponse {
                header: None,
                enabled: self.enabled,
                auth_revision: self.revision,
            }),
            R::Authenticate { name, .. } => {
                if !self.enabled {
                    return refuse(EtcdError::AuthNotEnabled);
                }
                match self.users.get(&name) {
                    None => return refuse(EtcdError::AuthFailed),
                    Some(u) if u.options.as_ref().is_some_and(|o| o.no_password) => {
                        return refuse(EtcdError::AuthFailed);
                    }
                    Some(_) => {}
                }
                AuthReply::Authenticate {
                    username: name,
                    revision: self.revision,
                }
            }
            R::UserAdd(r) => {
                if r.name.is_empty() {
                    return refuse(EtcdError::UserEmpty);
                }
                if r.name.len() > MAX_AUTH_NAME_BYTES {
                    return refuse(EtcdError::UserNameTooLong);
                }
                if self.users.contains_key(&r.name) {
                    return refuse(EtcdError::UserAlreadyExist);
                }
                let options = r.options.unwrap_or_default();
                let password = if options.no_password {
                    Vec::new()
                } else {
                    match select_password(&r.password, &r.hashed_password) {
                        Ok(p) => p,
                        Err(e) => return refuse(e),
                    }
                };
                let user = User {
                    name: r.name,
                    password,
                    roles: Vec::new(),
                    options: Some(options),
                };
                self.put_user(txn, user)?;
                self.commit_revision(txn)?;
                AuthReply::UserAdd(Default::default())
            }
            R::UserDelete(r) => {
                if self.enabled && r.name == ROOT {
                    return refuse(EtcdError::InvalidAuthMgmt);
                }
                if self.users.remove(&r.name).is_none() {
                    return refuse(EtcdError::UserNotFound);
                }
                txn.delete(Table::AuthUsers, &r.name)?;
                self.view.remove_user(&r.name);
                self.commit_revision(txn)?;
                AuthReply::UserDelete(Default::default())
            }
            R::UserGet(r) => {
                // A user may read itself; anything else needs root.
                if let Err(e) = self.check_admin(who)
                    && r.name != who.username
                {
                    return refuse(e);
                }
                let Some(u) = self.users.get(&r.name) else {
                    return refuse(EtcdError::UserNotFound);
                };
                AuthReply::UserGet(pb::AuthUserGetResponse {
                    header: None,
                    roles: u.roles.clone(),
                })
            }
            R::UserList => AuthReply::UserList(pb::AuthUserListResponse {
                header: None,
                users: self.users.keys().cloned().collect(),
            }),
            R::UserChangePassword(r) => {
                let Some(u) = self.users.get(&r.name).cloned() else {
                    return refuse(EtcdError::UserNotFound);
                };
                let no_password = u.options.as_ref().is_some_and(|o| o.no_password);
                let password = if no_password {
                    Vec::new()
                } else {
                    match select_password(&r.password, &r.hashed_password) {
                        Ok(p) => p,
                        Err(e) => return refuse(e),
                    }
                };
                self.put_user(txn, User { password, ..u })?;
                self.commit_revision(txn)?;
                AuthReply::UserChangePassword(Default::default())
            }
            R::UserGrantRole(r) => {
                let Some(mut u) = self.users.get(&r.user).cloned() else {
                    return refuse(EtcdError::UserNotFound);
                };
                if r.role != ROOT && !self.roles.contains_key(&r.role) {
                    return refuse(EtcdError::RoleNotFound);
                }
                if let Err(i) = u.roles.binary_search(&r.role) {
                    u.roles.insert(i, r.role);
                    self.put_user(txn, u)?;
                    self.commit_revision(txn)?;
                }
                AuthReply::UserGrantRole(Default::default())
            }
            R::UserRevokeRole(r) => {
                if self.enabled && r.name == ROOT && r.role == ROOT {
                    return refuse(EtcdError::InvalidAuthMgmt);
                }
                let Some(mut u) = self.users.get(&r.name).cloned() else {
                    return refuse(EtcdError::UserNotFound);
                };
                let before = u.roles.len();
                u.roles.retain(|x| x != &r.role);
                if u.roles.len() == before {
                    return refuse(EtcdError::RoleNotGranted);
                }
                self.put_user(txn, u)?;
                self.commit_revision(txn)?;
                AuthReply::UserRevokeRole(Default::default())
            }
            R::RoleAdd(r) => {
                if r.name.is_empty() {
                    return refuse(EtcdError::RoleEmpty);
                }
                if r.name.len() > MAX_AUTH_NAME_BYTES {
                    return refuse(EtcdError::RoleNameTooLong);
                }
                if self.roles.contains_key(&r.name) {
                    return refuse(EtcdError::RoleAlreadyExist);
                }
                self.put_role(
                    txn,
                    Role {
                        name: r.name,
                        key_permission: Vec::new(),
                    },
                )?;
                self.commit_revision(txn)?;
                AuthReply::RoleAdd(Default::default())
            }
            R::RoleGet(r) => {
                // A user may read the roles it holds; anything else needs root.
                if let Err(e) = self.check_admin(who) {
                    let holds = self
                        .users
                        .get(&who.username)
                        .is_some_and(|u| u.roles.contains(&r.role));
                    if !holds {
                        return refuse(e);
                    }
                }
                let Some(role) = self.roles.get(&r.role) else {
                    return refuse(EtcdError::RoleNotFound);
                };
                AuthReply::RoleGet(pb::AuthRoleGetResponse {
                    header: None,
                    perm: role.key_permission.clone(),
                })
            }
            R::RoleList => AuthReply::RoleList(pb::AuthRoleListResponse {
                header: None,
                roles: self.roles.keys().cloned().collect(),
            }),
            R::RoleDelete(r) => {
                if self.enabled && r.role == ROOT {
                    return refuse(EtcdError::InvalidAuthMgmt);
                }
                if self.roles.remove(&r.role).is_none() {
                    return refuse(EtcdError::RoleNotFound);
                }
                txn.delete(Table::AuthRoles, &r.role)?;
                let holders: Vec<User> = self
                    .users
                    .values()
                    .filter(|u| u.roles.contains(&r.role))
                    .cloned()
                    .collect();
                for mut u in holders {
                    u.roles.retain(|x| x != &r.role);
                    self.put_user(txn, u)?;
                }
                self.rebuild_all();
                self.commit_revision(txn)?;
                AuthReply::RoleDelete(Default::default())
            }
            R::RoleGrantPermission(r) => {
                let Some(perm) = r.perm else {
                    return refuse(EtcdError::PermissionNotGiven);
                };
                if !valid_permission_range(&perm.key, &perm.range_end) {
                    return refuse(EtcdError::InvalidAuthMgmt);
                }
                let Some(mut role) = self.roles.get(&r.name).cloned() else {
                    return refuse(EtcdError::RoleNotFound);
                };
                match role
                    .key_permission
                    .iter_mut()
                    .find(|p| p.key == perm.key && p.range_end == perm.range_end)
                {
                    Some(p) => p.perm_type = perm.perm_type,
                    None => {
                        role.key_permission.push(perm);
                        role.key_permission
                            .sort_by(|a, b| (&a.key, &a.range_end).cmp(&(&b.key, &b.range_end)));
                    }
                }
                self.put_role(txn, role)?;
                self.commit_revision(txn)?;
                AuthReply::RoleGrantPermission(Default::default())
            }
            R::RoleRevokePermission(r) => {
                let Some(mut role) = self.roles.get(&r.role).cloned() else {
                    return refuse(EtcdError::RoleNotFound);
                };
                let before = role.key_permission.len();
                role.key_permission
                    .retain(|p| p.key != r.key || p.range_end != r.range_end);
                if role.key_permission.len() == before {
                    return refuse(EtcdError::PermissionNotGranted);
                }
                self.put_role(txn, role)?;
                self.commit_revision(txn)?;
                AuthReply::RoleRevokePermission(Default::default())
            }
        };
        Ok(Ok(reply))
    }
}

/// The stored password: the base64 bcrypt hash the front proposed, or (an entry written by an
/// older proposer) a clear password hashed here, as etcd's `selectPassword` does.
/// etcd's `isValidPermissionRange` (3.5.8, #15619): a permission names a key, and a range end,
/// if any, above it or `"\0"` (every key from `key` on).
fn valid_permission_range(key: &[u8], range_end: &[u8]) -> bool {
    !key.is_empty() && (range_end.is_empty() || key < range_end || range_end == [0])
}

fn select_password(password: &[u8], hashed: &str) -> Result<Vec<u8>, EtcdError> {
    if !password.is_empty() && hashed.is_empty() {
        return crate::password::hash_password(password, crate::password::DEFAULT_COST)
            .map(String::into_bytes);
    }
    base64::engine::general_purpose::STANDARD
        .decode(hashed)
        .map_err(|_| EtcdError::NoPasswordUser)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_proto::authpb::{Permission, UserAddOptions, permission::Type};
    use actcd_types::storage::{KvEngine, MemEngine};

    fn hashed(pw: &str) -> String {
        let h = crate::password::hash_password(pw, 4).unwrap();
        base64::engine::general_purpose::STANDARD.encode(h)
    }

    fn user_add(name: &str) -> AuthRequest {
        AuthRequest::UserAdd(pb::AuthUserAddRequest {
            name: name.into(),
            hashed_password: hashed("pw"),
            ..Default::default()
        })
    }

    fn grant_role(user: &str, role: &str) -> AuthRequest {
        AuthRequest::UserGrantRole(pb::AuthUserGrantRoleRequest {
            user: user.into(),
            role: role.into(),
        })
    }

    fn role_add(name: &str) -> AuthRequest {
        AuthRequest::RoleAdd(pb::AuthRoleAddRequest { name: name.into() })
    }

    fn grant(role: &str, key: &str, end: &[u8], t: Type) -> AuthRequest {
        AuthRequest::RoleGrantPermission(pb::AuthRoleGrantPermissionRequest {
            name: role.into(),
            perm: Some(Permission {
                perm_type: t as i32,
                key: key.into(),
                range_end: end.to_vec(),
            }),
        })
    }

    fn as_root(s: &AuthStore) -> AuthInfo {
        AuthInfo {
            username: "root".into(),
            revision: s.revision(),
        }
    }

    /// Applies `steps` in order (as root once auth is on) and checks each outcome and the
    /// revision after it; then reopens the engine and checks the state came back.
    #[test]
    fn requests_answer_and_bump_the_revision_as_etcd_does() {
        use EtcdError::*;
        let engine = MemEngine::new();
        let mut s = AuthStore::open(&*engine.read().unwrap()).unwrap();
        assert_eq!((s.is_enabled(), s.revision()), (false, 1), "a fresh store");
        let steps: Vec<(&str, AuthRequest, Result<(), EtcdError>, u64)> = vec![
            (
                "enable without root",
                AuthRequest::Enable,
                Err(RootUserNotExist),
                1,
            ),
            ("add root", user_add("root"), Ok(()), 2),
            (
                "enable without root role",
                AuthRequest::Enable,
                Err(RootRoleNotExist),
                2,
            ),
            (
                "root role needs no add",
                grant_role("root", "root"),
                Ok(()),
                3,
            ),
            (
                "grant again: no change",
                grant_role("root", "root"),
                Ok(()),
                3,
            ),
            ("empty user", user_add(""), Err(UserEmpty), 3),
            ("duplicate user", user_add("root"), Err(UserAlreadyExist), 3),
            (
                "unknown role",
                grant_role("root", "nope"),
                Err(RoleNotFound),
                3,
            ),
            (
                "unknown user",
                grant_role("nobody", "root"),
                Err(UserNotFound),
                3,
            ),
            ("empty role", role_add(""), Err(RoleEmpty), 3),
            (
                "user name past the key limit",
                user_add(&"u".repeat(MAX_AUTH_NAME_BYTES + 1)),
                Err(UserNameTooLong),
                3,
            ),
            (
                "role name past the key limit",
                role_add(&"r".repeat(MAX_AUTH_NAME_BYTES + 1)),
                Err(RoleNameTooLong),
                3,
            ),
            ("add role", role_add("app"), Ok(()), 4),
            ("duplicate role", role_add("app"), Err(RoleAlreadyExist), 4),
            (
                "grant",
                grant("app", "a/", b"b", Type::Readwrite),
                Ok(()),
                5,
            ),
            (
                "grant again replaces",
                grant("app", "a/", b"b", Type::Read),
                Ok(()),
                6,
            ),
            (
                "no permission",
                AuthRequest::RoleGrantPermission(pb::AuthRoleGrantPermissionRequest {
                    name: "app".into(),
                    perm: None,
                }),
                Err(PermissionNotGiven),
                6,
            ),
            // etcd 3.5.8 (#15619): a range that holds no key is refused; 3.5.1 stored it.
            (
                "an empty range",
                grant("app", "b", b"a", Type::Read),
                Err(InvalidAuthMgmt),
                6,
            ),
            (
                "a range ending at its key",
                grant("app", "a", b"a", Type::Read),
                Err(InvalidAuthMgmt),
                6,
            ),
            (
                "no key",
                grant("app", "", b"", Type::Read),
                Err(InvalidAuthMgmt),
                6,
            ),
            (
                "revoke what isn't there",
                AuthRequest::RoleRevokePermission(pb::AuthRoleRevokePermissionRequest {
                    role: "app".into(),
                    key: b"zzz".to_vec(),
                    range_end: Vec::new(),
                }),
                Err(PermissionNotGranted),
                6,
            ),
            ("add alice", user_add("alice"), Ok(()), 7),
            ("alice gets app", grant_role("alice", "app"), Ok(()), 8),
            (
                "revoke a role not held",
                AuthRequest::UserRevokeRole(pb::AuthUserRevokeRoleRequest {
                    name: "alice".into(),
                    role: "other".into(),
                }),
                Err(RoleNotGranted),
                8,
            ),
            ("enable: no bump", AuthRequest::Enable, Ok(()), 8),
            (
                "root can't lose root",
                AuthRequest::UserRevokeRole(pb::AuthUserRevokeRoleRequest {
                    name: "root".into(),
                    role: "root".into(),
                }),
                Err(InvalidAuthMgmt),
                8,
            ),
            (
                "root can't go",
                AuthRequest::UserDelete(pb::AuthUserDeleteRequest {
                    name: "root".into(),
                }),
                Err(InvalidAuthMgmt),
                8,
            ),
            (
                "the root role can't go",
                AuthRequest::RoleDelete(pb::AuthRoleDeleteRequest {
                    role: "root".into(),
                }),
                Err(InvalidAuthMgmt),
                8,
            ),
        ];
        for (name, req, want, want_rev) in steps {
            let mut txn = engine.write().unwrap();
            let who = as_root(&s);
            let got = s.apply(&mut *txn, &who, req).unwrap().map(|_| ());
            txn.commit().unwrap();
            assert_eq!(got, want, "{name}");
            assert_eq!(s.revision(), want_rev, "{name}: revision");
        }
        assert!(s.is_enabled());
        let reopened = AuthStore::open(&*engine.read().unwrap()).unwrap();
        assert_eq!(reopened.revision(), s.revision());
        assert!(reopened.is_enabled());
        assert_eq!(reopened.users, s.users);
        assert_eq!(reopened.roles, s.roles);
        assert_eq!(reopened.view, s.view);
    }

    /// Names that are not UTF-8 are stored under their bytes (etcd's table keys), come back
    /// after a reopen, are listed in byte order, and only the role named exactly `root` makes
    /// a user root.
    #[test]
    fn names_are_bytes_through_the_tables() {
        let engine = MemEngine::new();
        let mut s = AuthStore::open(&*engine.read().unwrap()).unwrap();
        let mut txn = engine.write().unwrap();
        let nobody = AuthInfo::default();
        let u: &[u8] = b"u\xff\xfe";
        let fake_root: &[u8] = b"root\xff";
        let add = |name: &[u8]| {
            AuthRequest::UserAdd(pb::AuthUserAddRequest {
                name: name.to_vec(),
                hashed_password: hashed("pw"),
                ..Default::default()
            })
        };
        for r in [
            add(b"root"),
            grant_role("root", "root"),
            add(u),
            add("u\u{FFFD}\u{FFFD}".as_bytes()),
            AuthRequest::RoleAdd(pb::AuthRoleAddRequest {
                name: fake_root.to_vec(),
            }),
            AuthRequest::UserGrantRole(pb::AuthUserGrantRoleRequest {
                user: u.to_vec(),
                role: fake_root.to_vec(),
            }),
            AuthRequest::Enable,
        ] {
            s.apply(&mut *txn, &nobody, r).unwrap().unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(
            engine
                .read()
                .unwrap()
                .get(Table::AuthUsers, u)
                .unwrap()
                .map(|v| User::decode(v.as_slice()).unwrap().roles),
            Some(vec![fake_root.to_vec()]),
            "stored under its bytes"
        );
        let s = AuthStore::open(&*engine.read().unwrap()).unwrap();
        let as_u = AuthInfo {
            username: u.to_vec(),
            revision: s.revision(),
        };
        assert_eq!(
            s.check_admin(&as_u),
            Err(EtcdError::PermissionDenied),
            "root\\xff is not root"
        );
        let root = as_root(&s);
        let mut txn = engine.write().unwrap();
        let list = s.clone().apply(&mut *txn, &root, AuthRequest::UserList);
        let Ok(Ok(AuthReply::UserList(list))) = list else {
            panic!("{list:?}")
        };
        assert_eq!(
            list.users,
            [
                b"root".to_vec(),
                "u\u{FFFD}\u{FFFD}".as_bytes().to_vec(),
                u.to_vec()
            ],
            "byte order, as etcd sorts"
        );
        let get = s.clone().apply(
            &mut *txn,
            &as_u,
            AuthRequest::UserGet(pb::AuthUserGetRequest { name: u.to_vec() }),
        );
        assert!(
            matches!(get, Ok(Ok(AuthReply::UserGet(_)))),
            "a user reads itself"
        );
        assert_eq!(
            s.password_of("u\u{FFFD}".as_bytes()),
            Err(EtcdError::AuthFailed)
        );
        assert!(s.password_of(u).is_ok());
    }

    #[test]
    fn admin_rules_and_permission_checks() {
        let engine = MemEngine::new();
        let mut s = AuthStore::open(&*engine.read().unwrap()).unwrap();
        let mut txn = engine.write().unwrap();
        let nobody = AuthInfo::default();
        for r in [
            user_add("root"),
            grant_role("root", "root"),
            user_add("alice"),
            role_add("app"),
            grant("app", "a/", b"a0", Type::Readwrite),
            grant_role("alice", "app"),
            AuthRequest::UserAdd(pb::AuthUserAddRequest {
                name: "np".into(),
                options: Some(UserAddOptions { no_password: true }),
                ..Default::default()
            }),
            AuthRequest::Enable,
        ] {
            s.apply(&mut *txn, &nobody, r).unwrap().unwrap();
        }
        let alice = AuthInfo {
            username: "alice".into(),
            revision: s.revision(),
        };
        // Admin-only requests refuse alice and change nothing.
        let rev = s.revision();
        assert_eq!(
            s.apply(&mut *txn, &alice, role_add("x"))
                .unwrap()
                .map(|_| ()),
            Err(EtcdError::PermissionDenied)
        );
        assert_eq!(s.revision(), rev);
        assert_eq!(
            s.apply(&mut *txn, &nobody, AuthRequest::UserList)
                .unwrap()
                .map(|_| ()),
            Err(EtcdError::UserEmpty)
        );
        // A user may read itself and the roles it holds.
        let get_self = AuthRequest::UserGet(pb::AuthUserGetRequest {
            name: "alice".into(),
        });
        assert!(s.apply(&mut *txn, &alice, get_self).unwrap().is_ok());
        let get_root = AuthRequest::UserGet(pb::AuthUserGetRequest {
            name: "root".into(),
        });
        assert!(s.apply(&mut *txn, &alice, get_root).unwrap().is_err());
        let role_get = |r: &str| AuthRequest::RoleGet(pb::AuthRoleGetRequest { role: r.into() });
        assert!(s.apply(&mut *txn, &alice, role_get("app")).unwrap().is_ok());
        assert!(
            s.apply(&mut *txn, &alice, role_get("root"))
                .unwrap()
                .is_err()
        );
        // Checks.
        assert_eq!(s.check_range(&alice, b"a/1", b"", Perm::Write), Ok(()));
        assert_eq!(
            s.check_range(&alice, b"b/1", b"", Perm::Read),
            Err(EtcdError::PermissionDenied)
        );
        let stale = AuthInfo {
            revision: alice.revision - 1,
            ..alice.clone()
        };
        assert_eq!(
            s.check_range(&stale, b"a/1", b"", Perm::Read),
            Err(EtcdError::AuthOldRevision)
        );
        assert_eq!(
            s.check_range(&nobody, b"a/1", b"", Perm::Read),
            Err(EtcdError::UserEmpty)
        );
        assert_eq!(s.check_admin(&alice), Err(EtcdError::PermissionDenied));
        // Requests are checked by the view it publishes (crates/authz tests every kind).
        // Passwords: a no-password user can't log in.
        assert_eq!(s.password_of(b"np"), Err(EtcdError::NoPasswordUser));
        assert_eq!(s.password_of(b"ghost"), Err(EtcdError::AuthFailed));
        let (hash, rev) = s.password_of(b"alice").unwrap();
        assert!(crate::password::verify_password("pw", &hash));
        assert_eq!(rev, s.revision());
        // Deleting a role takes it from its holders.
        let root = as_root(&s);
        s.apply(
            &mut *txn,
            &root,
            AuthRequest::RoleDelete(pb::AuthRoleDeleteRequest { role: "app".into() }),
        )
        .unwrap()
        .unwrap();
        assert!(s.users[&b"alice"[..]].roles.is_empty());
        let alice = AuthInfo {
            username: "alice".into(),
            revision: s.revision(),
        };
        assert_eq!(
            s.check_range(&alice, b"a/1", b"", Perm::Read),
            Err(EtcdError::PermissionDenied)
        );
    }
}
