//! The one error type. Every refusal `AuthState::apply` can produce, with
//! etcd 3.4's exact message text (`auth: ` prefix included) and HTTP status.

use thiserror::Error;

/// Why an auth operation was refused (or could not be carried out).
///
/// `Display` is the message etcd 3.4 puts in `{"message":...}`; [`AuthError::status`]
/// is the HTTP status it answers with; [`AuthError::name`] is the `ErrXxx` name the
/// RFC's `/v2/security` error JSON carries.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    #[error("auth: already enabled")]
    AlreadyEnabled,
    #[error("auth: already disabled")]
    AlreadyDisabled,
    #[error("auth: No root user available, please create one")]
    NoRootUser,
    #[error("auth: Cannot create user {0} with an empty password")]
    EmptyPassword(String),
    /// Ours: the RFC's password endpoint with an empty password.
    #[error("auth: Cannot set an empty password for user {0}")]
    EmptyNewPassword(String),
    #[error("auth: User {0} already exists.")]
    UserExists(String),
    /// Lookup of a missing user (GET, update, grant, revoke, password).
    #[error("auth: User {0} does not exist.")]
    UserNotFound(String),
    /// DELETE of a missing user: etcd's text has no final period here.
    #[error("auth: User {0} does not exist")]
    DeleteUserNotFound(String),
    #[error("auth: Cannot delete root user while auth is enabled.")]
    DeleteRootWhileEnabled,
    #[error("auth: User not updated. Use grant/revoke/password to update the user.")]
    UserNotUpdated,
    #[error("auth: Granting duplicate role {role} for user {user}")]
    DuplicateRoleGrant { role: String, user: String },
    #[error("auth: Revoking ungranted role {role} for user {user}")]
    UngrantedRoleRevoke { role: String, user: String },
    /// Ours (RFC API only): granting a role that does not exist.
    #[error("auth: Cannot grant role {0}: it does not exist.")]
    GrantUnknownRole(String),
    /// Ours (RFC API only): the root user keeps the root role.
    #[error("auth: cannot revoke root role from root user")]
    RevokeRootFromRoot,
    #[error("auth: Cannot modify role root: is root role.")]
    RootRoleImmutable,
    #[error("auth: Role {0} already exists.")]
    RoleExists(String),
    /// Lookup of a missing role (GET, update).
    #[error("auth: Role {0} does not exist.")]
    RoleNotFound(String),
    /// DELETE of a missing role: etcd says "doesn't" here.
    #[error("auth: Role {0} doesn't exist.")]
    DeleteRoleNotFound(String),
    #[error("auth: Granting duplicate read permission {0}")]
    DuplicateReadPermission(String),
    #[error("auth: Granting duplicate write permission {0}")]
    DuplicateWritePermission(String),
    #[error("auth: Role not updated. Use grant/revoke to update the role.")]
    RoleNotUpdated,
    /// Ours: etcd stores an empty pattern and then panics on the first key check.
    #[error("auth: Cannot grant an empty permission pattern")]
    EmptyPattern,
    /// bcrypt refused (e.g. a cost out of range).
    #[error("auth: password hashing failed: {0}")]
    Hash(String),
    /// A snapshot or a replicated op could not be decoded.
    #[error("auth: cannot decode {0}")]
    Decode(String),
}

impl AuthError {
    /// The HTTP status etcd 3.4 answers this refusal with.
    pub fn status(&self) -> u16 {
        use AuthError::*;
        match self {
            AlreadyEnabled | AlreadyDisabled | NoRootUser | UserExists(_) | RoleExists(_) => 409,
            DuplicateRoleGrant { .. } | UngrantedRoleRevoke { .. } => 409,
            DuplicateReadPermission(_) | DuplicateWritePermission(_) => 409,
            GrantUnknownRole(_) | RevokeRootFromRoot => 409,
            EmptyPassword(_) | EmptyNewPassword(_) | UserNotUpdated | RoleNotUpdated => 400,
            EmptyPattern => 400,
            UserNotFound(_) | DeleteUserNotFound(_) | RoleNotFound(_) | DeleteRoleNotFound(_) => {
                404
            }
            DeleteRootWhileEnabled | RootRoleImmutable => 403,
            Hash(_) | Decode(_) => 500,
        }
    }

    /// The `ErrXxx` name used in the RFC's error JSON (`/v2/security`).
    pub fn name(&self) -> &'static str {
        use AuthError::*;
        match self {
            AlreadyEnabled => "ErrAlreadyEnabled",
            AlreadyDisabled => "ErrAlreadyDisabled",
            NoRootUser => "ErrNoRootUser",
            EmptyPassword(_) | EmptyNewPassword(_) => "ErrEmptyPassword",
            UserExists(_) => "ErrUserExists",
            UserNotFound(_) | DeleteUserNotFound(_) => "ErrUserNotFound",
            DeleteRootWhileEnabled => "ErrDeleteRootUser",
            UserNotUpdated => "ErrUserNotUpdated",
            DuplicateRoleGrant { .. } => "ErrDuplicateRoleGrant",
            UngrantedRoleRevoke { .. } => "ErrUngrantedRoleRevoke",
            GrantUnknownRole(_) => "ErrRoleNotFound",
            RevokeRootFromRoot => "ErrRevokeRootRole",
            RootRoleImmutable => "ErrRootRoleImmutable",
            RoleExists(_) => "ErrRoleExists",
            RoleNotFound(_) | DeleteRoleNotFound(_) => "ErrRoleNotFound",
            DuplicateReadPermission(_) | DuplicateWritePermission(_) => "ErrDuplicatePermission",
            RoleNotUpdated => "ErrRoleNotUpdated",
            EmptyPattern => "ErrEmptyPattern",
            Hash(_) => "ErrHash",
            Decode(_) => "ErrDecode",
        }
    }
}
