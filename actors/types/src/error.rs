//! Every error a client can see, with etcd 3.5.1's gRPC code and message.
//!
//! Clients (etcdctl, clientv3, Kubernetes) match on the message text, so each string here is the
//! one etcd sends. [`EtcdError::to_status`] is the only place an error becomes a `tonic::Status`;
//! its table is tested below.

use tonic::{Code, Status};

/// The longest user or role name the auth tables store: LMDB's key limit (511 bytes in its
/// default build). The auth store refuses longer names when it applies them, the same on every
/// member, instead of failing the batch that would write them.
pub const MAX_AUTH_NAME_BYTES: usize = 511;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    #[error("etcdserver: key not found")]
    KeyNotFound,
    #[error("etcdserver: value is provided")]
    ValueProvided,
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("etcdserver: invalid sort option")]
    InvalidSortOption,
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    #[error("etcdserver: too many requests")]
    TooManyRequests,
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    #[error("etcdserver: no leader")]
    NoLeader,
    #[error("etcdserver: not leader")]
    NotLeader,
    #[error("etcdserver: leader changed")]
    LeaderChanged,
    #[error("etcdserver: server stopped")]
    Stopped,
    #[error("etcdserver: request timed out")]
    Timeout,
    #[error("etcdserver: request timed out, possibly due to previous leader failure")]
    TimeoutDueToLeaderFail,
    #[error("etcdserver: request timed out, possibly due to connection lost")]
    TimeoutDueToConnectionLost,
    /// A write that waited for a leader until its deadline and was never proposed: etcd 3.5.1's
    /// raft node takes no proposal while there is no leader, and the request's context error
    /// reaches the client as it is, with code Unknown.
    #[error("context deadline exceeded")]
    ProposalDeadlineExceeded,
    #[error("etcdserver: permission denied")]
    PermissionDenied,
    // Auth. etcd 3.5.1 maps the last two to no gRPC error of its own: they reach clients with
    // code Unknown and the auth store's own text.
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    #[error("etcdserver: user name already exists")]
    UserAlreadyExist,
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    #[error("etcdserver: user name not found")]
    UserNotFound,
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExist,
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    /// actcd only: a user or role name is a key of its LMDB table, and LMDB keys are at most
    /// [`MAX_AUTH_NAME_BYTES`] bytes. (etcd 3.5.1 stores names as bbolt keys too; past bbolt's
    /// 32 KiB limit its write fails and the member exits.)
    #[error("etcdserver: user name is too long")]
    UserNameTooLong,
    #[error("etcdserver: role name is too long")]
    RoleNameTooLong,
    #[error("etcdserver: authentication failed, invalid user ID or password")]
    AuthFailed,
    #[error("etcdserver: permission not given")]
    PermissionNotGiven,
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    #[error("etcdserver: authentication is not enabled")]
    AuthNotEnabled,
    #[error("etcdserver: invalid auth token")]
    InvalidAuthToken,
    #[error("etcdserver: invalid auth management")]
    InvalidAuthMgmt,
    #[error("auth: revision in header is old")]
    AuthOldRevision,
    #[error("auth: authentication failed, password was given for no password user")]
    NoPasswordUser,
    // etcd 3.5.1's admin check of Defragment, Snapshot, Hash and HashKV hands the auth
    // store's refusal to gRPC unconverted: code Unknown and the store's own text (see
    // [`EtcdError::unconverted_admin_refusal`]).
    #[error("auth: user name is empty")]
    AuthStoreUserEmpty,
    #[error("auth: user not found")]
    AuthStoreUserNotFound,
    #[error("auth: permission denied")]
    AuthStorePermissionDenied,
    #[error("auth: invalid auth token")]
    AuthStoreInvalidAuthToken,
    #[error("etcdserver: corrupt cluster")]
    Corrupt,
    // Membership.
    #[error("etcdserver: member ID already exist")]
    MemberExist,
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExist,
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    MemberNotEnoughStarted,
    #[error("etcdserver: given member URLs are invalid")]
    MemberBadUrls,
    #[error("etcdserver: member not found")]
    MemberNotFound,
    /// A member id that was removed (and can never come back): the same answer as
    /// [`EtcdError::MemberNotFound`] for gRPC clients, as etcd maps it; the v2 members API
    /// answers it with 410 Gone.
    #[error("etcdserver: member not found")]
    MemberRemoved,
    #[error("etcdserver: can only promote a learner member")]
    MemberNotLearner,
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    #[error("etcdserver: too many learner members in cluster")]
    TooManyLearners,
    #[error("etcdserver: rpc not supported for learner")]
    NotSupportedForLearner,
    #[error("etcdserver: bad leader transferee")]
    BadLeaderTransferee,
    #[error("etcdserver: unhealthy cluster")]
    Unhealthy,
    // Downgrade.
    #[error("etcdserver: wrong downgrade target version format")]
    WrongDowngradeVersionFormat,
    #[error("etcdserver: invalid downgrade target version")]
    InvalidDowngradeTargetVersion,
    #[error("etcdserver: no inflight downgrade job")]
    NoInflightDowngrade,
    #[error("etcdserver: unknown method")]
    UnknownMethod,
    // The lock and election services (etcd's `concurrency` package errors, sent as Unknown).
    #[error("election: not leader")]
    ElectionNotLeader,
    #[error("election: no leader")]
    ElectionNoLeader,
    #[error("\"leader\" field must be provided")]
    MissingLeaderKey,
    #[error("mutex: session is expired")]
    SessionExpired,
    #[error("etcdserver: request timed out, leader transfer took too long")]
    LeaderTransferTimeout,
    /// A failure inside the server (storage I/O, a closed mailbox) that etcd would also report as
    /// an unknown error with its own text.
    #[error("{0}")]
    Internal(String),
}

impl EtcdError {
    /// The gRPC code etcd sends with this error.
    pub fn code(&self) -> Code {
        use EtcdError::*;
        match self {
            EmptyKey | KeyNotFound | ValueProvided | LeaseProvided | TooManyOps | DuplicateKey
            | InvalidSortOption | RequestTooLarge => Code::InvalidArgument,
            Compacted | FutureRevision | LeaseTtlTooLarge => Code::OutOfRange,
            NoSpace | TooManyRequests => Code::ResourceExhausted,
            LeaseNotFound => Code::NotFound,
            NotLeader | LeaseExists => Code::FailedPrecondition,
            NoLeader
            | LeaderChanged
            | Stopped
            | Timeout
            | TimeoutDueToLeaderFail
            | TimeoutDueToConnectionLost
            | NotSupportedForLearner
            | LeaderTransferTimeout
            | Unhealthy => Code::Unavailable,
            MemberExist
            | PeerUrlExist
            | MemberNotEnoughStarted
            | MemberNotLearner
            | LearnerNotReady
            | TooManyLearners
            | BadLeaderTransferee => Code::FailedPrecondition,
            MemberBadUrls | WrongDowngradeVersionFormat | InvalidDowngradeTargetVersion => {
                Code::InvalidArgument
            }
            NoInflightDowngrade => Code::FailedPrecondition,
            UnknownMethod
            | ElectionNotLeader
            | ElectionNoLeader
            | MissingLeaderKey
            | SessionExpired
            | ProposalDeadlineExceeded => Code::Unknown,
            MemberNotFound | MemberRemoved => Code::NotFound,
            PermissionDenied => Code::PermissionDenied,
            Corrupt => Code::DataLoss,
            RootUserNotExist | RootRoleNotExist | UserAlreadyExist | UserNotFound
            | RoleAlreadyExist | RoleNotFound | RoleNotGranted | PermissionNotGranted
            | AuthNotEnabled => Code::FailedPrecondition,
            UserEmpty | RoleEmpty | UserNameTooLong | RoleNameTooLong | AuthFailed
            | PermissionNotGiven | InvalidAuthMgmt => Code::InvalidArgument,
            InvalidAuthToken => Code::Unauthenticated,
            AuthOldRevision | NoPasswordUser => Code::Unknown,
            AuthStoreUserEmpty
            | AuthStoreUserNotFound
            | AuthStorePermissionDenied
            | AuthStoreInvalidAuthToken => Code::Unknown,
            Internal(_) => Code::Unknown,
        }
    }

    pub fn to_status(&self) -> Status {
        Status::new(self.code(), self.to_string())
    }

    /// An admin check's refusal as etcd 3.5.1's maintenance service sends it: the auth store's
    /// own error, not converted to the `etcdserver:` one. Anything else is left as it is.
    pub fn unconverted_admin_refusal(self) -> Self {
        match self {
            Self::UserEmpty => Self::AuthStoreUserEmpty,
            Self::UserNotFound => Self::AuthStoreUserNotFound,
            Self::PermissionDenied => Self::AuthStorePermissionDenied,
            Self::InvalidAuthToken => Self::AuthStoreInvalidAuthToken,
            other => other,
        }
    }

    /// Shorthand for storage and plumbing failures.
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::Internal(e.to_string())
    }
}

impl From<EtcdError> for Status {
    fn from(e: EtcdError) -> Self {
        e.to_status()
    }
}

impl From<actix::MailboxError> for EtcdError {
    /// A closed mailbox means the actor system is shutting down.
    fn from(_: actix::MailboxError) -> Self {
        Self::Stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_maps_to_etcds_code_and_text() {
        struct Case {
            err: EtcdError,
            want_code: Code,
            want_msg: &'static str,
        }
        use EtcdError::*;
        let cases = [
            Case {
                err: EmptyKey,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: key is not provided",
            },
            Case {
                err: KeyNotFound,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: key not found",
            },
            Case {
                err: ValueProvided,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: value is provided",
            },
            Case {
                err: LeaseProvided,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: lease is provided",
            },
            Case {
                err: TooManyOps,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: too many operations in txn request",
            },
            Case {
                err: DuplicateKey,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: duplicate key given in txn request",
            },
            Case {
                err: InvalidSortOption,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: invalid sort option",
            },
            Case {
                err: RequestTooLarge,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: request is too large",
            },
            Case {
                err: TooManyRequests,
                want_code: Code::ResourceExhausted,
                want_msg: "etcdserver: too many requests",
            },
            Case {
                err: ElectionNotLeader,
                want_code: Code::Unknown,
                want_msg: "election: not leader",
            },
            Case {
                err: ElectionNoLeader,
                want_code: Code::Unknown,
                want_msg: "election: no leader",
            },
            Case {
                err: MissingLeaderKey,
                want_code: Code::Unknown,
                want_msg: "\"leader\" field must be provided",
            },
            Case {
                err: SessionExpired,
                want_code: Code::Unknown,
                want_msg: "mutex: session is expired",
            },
            Case {
                err: Compacted,
                want_code: Code::OutOfRange,
                want_msg: "etcdserver: mvcc: required revision has been compacted",
            },
            Case {
                err: FutureRevision,
                want_code: Code::OutOfRange,
                want_msg: "etcdserver: mvcc: required revision is a future revision",
            },
            Case {
                err: NoSpace,
                want_code: Code::ResourceExhausted,
                want_msg: "etcdserver: mvcc: database space exceeded",
            },
            Case {
                err: LeaseExists,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: lease already exists",
            },
            Case {
                err: LeaseTtlTooLarge,
                want_code: Code::OutOfRange,
                want_msg: "etcdserver: too large lease TTL",
            },
            Case {
                err: LeaseNotFound,
                want_code: Code::NotFound,
                want_msg: "etcdserver: requested lease not found",
            },
            Case {
                err: NoLeader,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: no leader",
            },
            Case {
                err: ProposalDeadlineExceeded,
                want_code: Code::Unknown,
                want_msg: "context deadline exceeded",
            },
            Case {
                err: NotLeader,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: not leader",
            },
            Case {
                err: LeaderChanged,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: leader changed",
            },
            Case {
                err: Stopped,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: server stopped",
            },
            Case {
                err: Timeout,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: request timed out",
            },
            Case {
                err: MemberExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: member ID already exist",
            },
            Case {
                err: PeerUrlExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: Peer URLs already exists",
            },
            Case {
                err: MemberNotEnoughStarted,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: re-configuration failed due to not enough started members",
            },
            Case {
                err: MemberBadUrls,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: given member URLs are invalid",
            },
            Case {
                err: MemberNotFound,
                want_code: Code::NotFound,
                want_msg: "etcdserver: member not found",
            },
            Case {
                err: MemberRemoved,
                want_code: Code::NotFound,
                want_msg: "etcdserver: member not found",
            },
            Case {
                err: MemberNotLearner,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: can only promote a learner member",
            },
            Case {
                err: LearnerNotReady,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: can only promote a learner member which is in sync with leader",
            },
            Case {
                err: TooManyLearners,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: too many learner members in cluster",
            },
            Case {
                err: NotSupportedForLearner,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: rpc not supported for learner",
            },
            Case {
                err: TimeoutDueToLeaderFail,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: request timed out, possibly due to previous leader failure",
            },
            Case {
                err: TimeoutDueToConnectionLost,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: request timed out, possibly due to connection lost",
            },
            Case {
                err: InvalidDowngradeTargetVersion,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: invalid downgrade target version",
            },
            Case {
                err: NoInflightDowngrade,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: no inflight downgrade job",
            },
            Case {
                err: Unhealthy,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: unhealthy cluster",
            },
            Case {
                err: LeaderTransferTimeout,
                want_code: Code::Unavailable,
                want_msg: "etcdserver: request timed out, leader transfer took too long",
            },
            Case {
                err: BadLeaderTransferee,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: bad leader transferee",
            },
            Case {
                err: RootUserNotExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: root user does not exist",
            },
            Case {
                err: RootRoleNotExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: root user does not have root role",
            },
            Case {
                err: UserAlreadyExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: user name already exists",
            },
            Case {
                err: UserEmpty,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: user name is empty",
            },
            Case {
                err: UserNameTooLong,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: user name is too long",
            },
            Case {
                err: RoleNameTooLong,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: role name is too long",
            },
            Case {
                err: UserNotFound,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: user name not found",
            },
            Case {
                err: RoleAlreadyExist,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: role name already exists",
            },
            Case {
                err: RoleNotFound,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: role name not found",
            },
            Case {
                err: RoleEmpty,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: role name is empty",
            },
            Case {
                err: AuthFailed,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: authentication failed, invalid user ID or password",
            },
            Case {
                err: PermissionNotGiven,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: permission not given",
            },
            Case {
                err: RoleNotGranted,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: role is not granted to the user",
            },
            Case {
                err: PermissionNotGranted,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: permission is not granted to the role",
            },
            Case {
                err: AuthNotEnabled,
                want_code: Code::FailedPrecondition,
                want_msg: "etcdserver: authentication is not enabled",
            },
            Case {
                err: InvalidAuthToken,
                want_code: Code::Unauthenticated,
                want_msg: "etcdserver: invalid auth token",
            },
            Case {
                err: InvalidAuthMgmt,
                want_code: Code::InvalidArgument,
                want_msg: "etcdserver: invalid auth management",
            },
            Case {
                err: AuthOldRevision,
                want_code: Code::Unknown,
                want_msg: "auth: revision in header is old",
            },
            Case {
                err: NoPasswordUser,
                want_code: Code::Unknown,
                want_msg: "auth: authentication failed, password was given for no password user",
            },
            Case {
                err: PermissionDenied,
                want_code: Code::PermissionDenied,
                want_msg: "etcdserver: permission denied",
            },
            Case {
                err: PermissionDenied.unconverted_admin_refusal(),
                want_code: Code::Unknown,
                want_msg: "auth: permission denied",
            },
            Case {
                err: UserEmpty.unconverted_admin_refusal(),
                want_code: Code::Unknown,
                want_msg: "auth: user name is empty",
            },
            Case {
                err: UserNotFound.unconverted_admin_refusal(),
                want_code: Code::Unknown,
                want_msg: "auth: user not found",
            },
            Case {
                err: InvalidAuthToken.unconverted_admin_refusal(),
                want_code: Code::Unknown,
                want_msg: "auth: invalid auth token",
            },
            Case {
                err: Corrupt,
                want_code: Code::DataLoss,
                want_msg: "etcdserver: corrupt cluster",
            },
            Case {
                err: Internal("disk on fire".into()),
                want_code: Code::Unknown,
                want_msg: "disk on fire",
            },
        ];
        for c in cases {
            let st = c.err.to_status();
            assert_eq!(st.code(), c.want_code, "{:?}", c.err);
            assert_eq!(st.message(), c.want_msg);
        }
    }
}
