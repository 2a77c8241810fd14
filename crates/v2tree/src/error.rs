//! The v2 error: etcd's numbered error codes, their fixed messages, the HTTP
//! status each maps to and the JSON body the v2 API writes for them.

use crate::json::push_go_string;

/// The key (or a component of its path) does not exist.
pub const ECODE_KEY_NOT_FOUND: u32 = 100;
/// A compare (prevValue / prevIndex) did not hold.
pub const ECODE_TEST_FAILED: u32 = 101;
/// The operation needs a file (a key with a value) but found a directory.
pub const ECODE_NOT_FILE: u32 = 102;
/// Legacy: the cluster had the most peers it may have.
pub const ECODE_NO_MORE_PEER: u32 = 103;
/// A path component that must be a directory is a file.
pub const ECODE_NOT_DIR: u32 = 104;
/// The key exists already (create, `prevExist=false`).
pub const ECODE_NODE_EXIST: u32 = 105;
/// Legacy: the key's prefix is reserved.
pub const ECODE_KEY_IS_PRESERVED: u32 = 106;
/// The root may not be written or removed.
pub const ECODE_ROOT_RONLY: u32 = 107;
/// A directory with children was removed without `recursive`.
pub const ECODE_DIR_NOT_EMPTY: u32 = 108;
/// Legacy: the peer address is in use.
pub const ECODE_EXISTING_PEER_ADDR: u32 = 109;
/// The request lacks the credentials it needs.
pub const ECODE_UNAUTHORIZED: u32 = 110;

/// Legacy form error: a value is required.
pub const ECODE_VALUE_REQUIRED: u32 = 200;
/// `prevValue` was given but empty.
pub const ECODE_PREV_VALUE_REQUIRED: u32 = 201;
/// `ttl` is not an unsigned number.
pub const ECODE_TTL_NAN: u32 = 202;
/// `prevIndex` or `waitIndex` is not an unsigned number.
pub const ECODE_INDEX_NAN: u32 = 203;
/// Legacy form error: value or TTL required.
pub const ECODE_VALUE_OR_TTL_REQUIRED: u32 = 204;
/// Legacy form error: bad timeout.
pub const ECODE_TIMEOUT_NAN: u32 = 205;
/// Legacy form error: a name is required.
pub const ECODE_NAME_REQUIRED: u32 = 206;
/// Legacy form error: index or value required.
pub const ECODE_INDEX_OR_VALUE_REQUIRED: u32 = 207;
/// Legacy form error: index and value together.
pub const ECODE_INDEX_VALUE_MUTEX: u32 = 208;
/// A boolean field could not be parsed, or a field is used where it may not be.
pub const ECODE_INVALID_FIELD: u32 = 209;
/// The form itself could not be parsed.
pub const ECODE_INVALID_FORM: u32 = 210;
/// `refresh=true` came with a value.
pub const ECODE_REFRESH_VALUE: u32 = 211;
/// `refresh=true` came without a TTL.
pub const ECODE_REFRESH_TTL_REQUIRED: u32 = 212;

/// Anything that went wrong below the store (raft, proposals, unknown methods).
pub const ECODE_RAFT_INTERNAL: u32 = 300;
/// A leader election is under way.
pub const ECODE_LEADER_ELECT: u32 = 301;

/// The watcher was dropped because the store was recovered.
pub const ECODE_WATCHER_CLEARED: u32 = 400;
/// The `waitIndex` is older than the event history window.
pub const ECODE_EVENT_INDEX_CLEARED: u32 = 401;
/// Legacy standby error.
pub const ECODE_STANDBY_INTERNAL: u32 = 402;
/// Legacy standby error.
pub const ECODE_INVALID_ACTIVE_SIZE: u32 = 403;
/// Legacy standby error.
pub const ECODE_INVALID_REMOVE_DELAY: u32 = 404;
/// Legacy client error.
pub const ECODE_CLIENT_INTERNAL: u32 = 500;

/// The fixed message etcd 3.4 attaches to a code; codes it does not know get
/// an empty message (as a missing Go map entry does).
#[must_use]
pub fn message_for(code: u32) -> &'static str {
    match code {
        ECODE_KEY_NOT_FOUND => "Key not found",
        ECODE_TEST_FAILED => "Compare failed",
        ECODE_NOT_FILE => "Not a file",
        ECODE_NO_MORE_PEER => "Reached the max number of peers in the cluster",
        ECODE_NOT_DIR => "Not a directory",
        ECODE_NODE_EXIST => "Key already exists",
        ECODE_KEY_IS_PRESERVED => "The prefix of given key is a keyword in etcd",
        ECODE_ROOT_RONLY => "Root is read only",
        ECODE_DIR_NOT_EMPTY => "Directory not empty",
        ECODE_EXISTING_PEER_ADDR => "Peer address has existed",
        ECODE_UNAUTHORIZED => "The request requires user authentication",
        ECODE_VALUE_REQUIRED => "Value is Required in POST form",
        ECODE_PREV_VALUE_REQUIRED => "PrevValue is Required in POST form",
        ECODE_TTL_NAN => "The given TTL in POST form is not a number",
        ECODE_INDEX_NAN => "The given index in POST form is not a number",
        ECODE_VALUE_OR_TTL_REQUIRED => "Value or TTL is required in POST form",
        ECODE_TIMEOUT_NAN => "The given timeout in POST form is not a number",
        ECODE_NAME_REQUIRED => "Name is required in POST form",
        ECODE_INDEX_OR_VALUE_REQUIRED => "Index or value is required",
        ECODE_INDEX_VALUE_MUTEX => "Index and value cannot both be specified",
        ECODE_INVALID_FIELD => "Invalid field",
        ECODE_INVALID_FORM => "Invalid POST form",
        ECODE_REFRESH_VALUE => "Value provided on refresh",
        ECODE_REFRESH_TTL_REQUIRED => "A TTL must be provided on refresh",
        ECODE_RAFT_INTERNAL => "Raft Internal Error",
        ECODE_LEADER_ELECT => "During Leader Election",
        ECODE_WATCHER_CLEARED => "watcher is cleared due to etcd recovery",
        ECODE_EVENT_INDEX_CLEARED => "The event in requested index is outdated and cleared",
        ECODE_STANDBY_INTERNAL => "Standby Internal Error",
        ECODE_INVALID_ACTIVE_SIZE => "Invalid active size",
        ECODE_INVALID_REMOVE_DELAY => "Standby remove delay",
        ECODE_CLIENT_INTERNAL => "Client Internal Error",
        _ => "",
    }
}

/// A v2 error as etcd reports it: a code, a free-text cause and the store
/// index at the time (0 for errors found before the store was consulted,
/// such as request-parsing errors).
///
/// The HTTP layer answers with [`V2Error::http_status`], the header
/// `X-Etcd-Index: {index}` and the body [`V2Error::to_json`] followed by a
/// single `\n` (etcd's writer appends it; `to_json` does not).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} ({})", message_for(*.code), .cause)]
pub struct V2Error {
    /// etcd's error code (`errorCode`).
    pub code: u32,
    /// The detail (`cause`), omitted from the JSON when empty.
    pub cause: String,
    /// The store index when the error was raised (`index`).
    pub index: u64,
}

impl V2Error {
    /// An error with the given code, cause and index.
    #[must_use]
    pub fn new(code: u32, cause: impl Into<String>, index: u64) -> Self {
        V2Error {
            code,
            cause: cause.into(),
            index,
        }
    }

    /// An error found while reading the request (index 0).
    #[must_use]
    pub fn request(code: u32, cause: impl Into<String>) -> Self {
        V2Error::new(code, cause, 0)
    }

    /// etcd's message for this code.
    #[must_use]
    pub fn message(&self) -> &'static str {
        message_for(self.code)
    }

    /// The HTTP status etcd answers this error with: 404 for a missing key,
    /// 403 for "not a file" and "directory not empty", 401 for
    /// "unauthorized", 412 for failed compares and existing keys, 500 for the
    /// raft/leader errors, and 400 for everything else.
    #[must_use]
    pub fn http_status(&self) -> u16 {
        match self.code {
            ECODE_KEY_NOT_FOUND => 404,
            ECODE_NOT_FILE | ECODE_DIR_NOT_EMPTY => 403,
            ECODE_UNAUTHORIZED => 401,
            ECODE_TEST_FAILED | ECODE_NODE_EXIST => 412,
            ECODE_RAFT_INTERNAL | ECODE_LEADER_ELECT => 500,
            _ => 400,
        }
    }

    /// The JSON body etcd writes, without the trailing newline:
    /// `{"errorCode":C,"message":"M","cause":"X","index":N}`, `cause` left
    /// out when empty.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.cause.len());
        out.push_str("{\"errorCode\":");
        out.push_str(&self.code.to_string());
        out.push_str(",\"message\":");
        push_go_string(&mut out, self.message());
        if !self.cause.is_empty() {
            out.push_str(",\"cause\":");
            push_go_string(&mut out, &self.cause);
        }
        out.push_str(",\"index\":");
        out.push_str(&self.index.to_string());
        out.push('}');
        out
    }
}
