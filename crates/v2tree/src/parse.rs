//! Reading a `/v2/keys` HTTP request into a [`V2Request`], with etcd's
//! validation (its `parseKeyRequest`) and error codes.

use actcd_proto::actcdpb::V2Request;

use crate::error::{
    ECODE_INDEX_NAN, ECODE_INVALID_FIELD, ECODE_PREV_VALUE_REQUIRED, ECODE_REFRESH_TTL_REQUIRED,
    ECODE_REFRESH_VALUE, ECODE_TTL_NAN, V2Error,
};
use crate::node::clean_path;

/// A parsed `/v2/keys` request.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRequest {
    /// The request. `method` is the HTTP method, except that a `GET` with
    /// `quorum=true` becomes `QGET` (as etcd turns it into a quorum read,
    /// even when it also asks to `wait`). `path` is the clean key path
    /// (`/` for the root). `expiration` is `now + ttl` seconds in Unix
    /// nanoseconds when a non-empty `ttl` was given, else 0 (no TTL: an
    /// empty `ttl=` therefore makes the key permanent, while `ttl=0` makes
    /// it expire at once). `id` and `time` are left 0 for the caller.
    pub request: V2Request,
    /// `noValueOnSuccess=true`: answer writes with the action alone (see
    /// [`crate::Event::to_json_no_value`]).
    pub no_value_on_success: bool,
}

impl KeyRequest {
    /// A watch (`GET` with `wait=true`): [`crate::Store::watch`] with
    /// `path`, `recursive`, `stream` and `since` (`waitIndex`).
    #[must_use]
    pub fn is_watch(&self) -> bool {
        self.request.method == "GET" && self.request.wait
    }

    /// A read served locally without raft (`GET` without `wait`, `HEAD`):
    /// [`crate::Store::get`].
    #[must_use]
    pub fn is_local_read(&self) -> bool {
        (self.request.method == "GET" && !self.request.wait) || self.request.method == "HEAD"
    }

    /// A request that goes through raft and [`crate::Store::apply`]
    /// (`PUT`, `POST`, `DELETE`, `QGET`).
    #[must_use]
    pub fn needs_proposal(&self) -> bool {
        matches!(
            self.request.method.as_str(),
            "PUT" | "POST" | "DELETE" | "QGET"
        )
    }
}

struct Form<'a>(&'a [(String, String)]);

impl Form<'_> {
    /// The first value given for `key`, if any.
    fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn value(&self, key: &str) -> &str {
        self.first(key).unwrap_or("")
    }

    fn uint(&self, key: &str) -> Result<u64, ()> {
        self.first(key).map_or(Ok(0), parse_go_uint)
    }

    fn boolean(&self, key: &str) -> Result<bool, ()> {
        self.first(key).map_or(Ok(false), parse_go_bool)
    }
}

/// Go's `strconv.ParseUint(s, 10, 64)`: decimal digits only, no sign.
fn parse_go_uint(s: &str) -> Result<u64, ()> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    s.parse::<u64>().map_err(|_| ())
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Result<bool, ()> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(()),
    }
}

fn invalid(code: u32, cause: &str) -> V2Error {
    V2Error::request(code, cause)
}

/// Parses a `/v2/keys` request as etcd does. `key_path` is the URL path
/// after `/v2/keys` (decoded); `params` are the form values in Go's
/// `r.Form` order (body values first, then the query string), of which
/// the first for each name counts; `now` (Unix nanoseconds) turns `ttl`
/// into an absolute expiration. Errors carry index 0 (so `X-Etcd-Index: 0`).
pub fn parse_key_request(
    method: &str,
    key_path: &str,
    params: &[(String, String)],
    now: i64,
) -> Result<KeyRequest, V2Error> {
    let form = Form(params);
    let prev_index = form
        .uint("prevIndex")
        .map_err(|()| invalid(ECODE_INDEX_NAN, "invalid value for \"prevIndex\""))?;
    let since = form
        .uint("waitIndex")
        .map_err(|()| invalid(ECODE_INDEX_NAN, "invalid value for \"waitIndex\""))?;
    let flag = |name: &str| {
        form.boolean(name).map_err(|()| {
            invalid(
                ECODE_INVALID_FIELD,
                &format!("invalid value for \"{name}\""),
            )
        })
    };
    let recursive = flag("recursive")?;
    let sorted = flag("sorted")?;
    let wait = flag("wait")?;
    let dir = flag("dir")?;
    let quorum = flag("quorum")?;
    let stream = flag("stream")?;
    if wait && method != "GET" {
        return Err(invalid(
            ECODE_INVALID_FIELD,
            "\"wait\" can only be used with GET requests",
        ));
    }
    let prev_value = form.value("prevValue").to_owned();
    if form.first("prevValue").is_some() && prev_value.is_empty() {
        return Err(invalid(
            ECODE_PREV_VALUE_REQUIRED,
            "\"prevValue\" cannot be empty",
        ));
    }
    let no_value_on_success = flag("noValueOnSuccess")?;
    let ttl = if form.value("ttl").is_empty() {
        None
    } else {
        Some(
            form.uint("ttl")
                .map_err(|()| invalid(ECODE_TTL_NAN, "invalid value for \"ttl\""))?,
        )
    };
    let prev_exist = match form.first("prevExist") {
        None => None,
        Some(v) => Some(
            parse_go_bool(v)
                .map_err(|()| invalid(ECODE_INVALID_FIELD, "invalid value for prevExist"))?,
        ),
    };
    let refresh = match form.first("refresh") {
        None => None,
        Some(v) => Some(
            parse_go_bool(v)
                .map_err(|()| invalid(ECODE_INVALID_FIELD, "invalid value for refresh"))?,
        ),
    };
    if refresh == Some(true) {
        if !form.value("value").is_empty() {
            return Err(invalid(
                ECODE_REFRESH_VALUE,
                "A value was provided on a refresh",
            ));
        }
        if ttl.is_none() {
            return Err(invalid(ECODE_REFRESH_TTL_REQUIRED, "No TTL value set"));
        }
    }
    // Go multiplies the seconds into a Duration and adds it, wrapping on
    // overflow; so do we.
    let expiration = ttl.map_or(0, |secs| {
        now.wrapping_add(secs.cast_signed().wrapping_mul(1_000_000_000))
    });
    let method = if method == "GET" && quorum {
        "QGET"
    } else {
        method
    };
    Ok(KeyRequest {
        request: V2Request {
            id: 0,
            method: method.to_owned(),
            path: clean_path(key_path),
            val: form.value("value").to_owned(),
            dir,
            prev_value,
            prev_index,
            prev_exist,
            expiration,
            wait,
            since,
            recursive,
            sorted,
            quorum,
            time: 0,
            stream,
            refresh,
            auth_op: Vec::new(),
        },
        no_value_on_success,
    })
}
