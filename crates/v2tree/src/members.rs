//! etcd's v2 members API (`/v2/members`) as its wire shows it: a member's JSON
//! ([`member_json`]) and the `{"peerURLs":[…]}` body of an add or update read as etcd reads a
//! `MemberCreateRequest` ([`peer_urls`]): Go's `encoding/json` field matching and type errors,
//! the common syntax errors in Go's words, and `types.NewURLs`' checks of each URL.

/// A refused members request: the HTTP status and the message etcd answers with (in
/// `{"message":…}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
}

impl Refusal {
    fn bad_request(message: String) -> Self {
        Refusal {
            status: 400,
            message,
        }
    }
}

/// A JSON string, quoted.
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| q(s)).collect();
    format!("[{}]", quoted.join(","))
}

/// A member as etcd's v2 API writes it: `{"id","name","peerURLs","clientURLs"}` in etcd's
/// order, the id in hex without padding, a missing list `[]`.
pub fn member_json(id: u64, name: &str, peer_urls: &[String], client_urls: &[String]) -> String {
    format!(
        "{{\"id\":{},\"name\":{},\"peerURLs\":{},\"clientURLs\":{}}}",
        q(&format!("{id:x}")),
        q(name),
        list(peer_urls),
        list(client_urls)
    )
}

/// The peer URLs of a members add or update: `{"peerURLs":[…]}` with a JSON `content_type`,
/// read as etcd reads a `MemberCreateRequest`. Refused as etcd refuses it: 415 for another
/// content type, 400 for a body it cannot decode, a value of another type, no URL, or a URL
/// `types.NewURLs` refuses.
pub fn peer_urls(content_type: Option<&str>, body: &[u8]) -> Result<Vec<String>, Refusal> {
    let ct = content_type.unwrap_or_default();
    if !ct.starts_with("application/json") {
        return Err(Refusal {
            status: 415,
            message: format!("Bad Content-Type {ct}, accept application/json"),
        });
    }
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| Refusal::bad_request(go_json_error(body)))?;
    // Go's encoding/json: the exact field name first, then any case; a value of another type
    // is refused with Go's words (the hostile run found a list with a number in it adding a
    // voting member: every non-string was dropped and the rest taken).
    let field = v.get("peerURLs").or_else(|| {
        v.as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("peerURLs"))
            .map(|(_, v)| v)
    });
    let refuse = |what: &serde_json::Value, of: &str| {
        Refusal::bad_request(format!(
            "json: cannot unmarshal {} into Go struct field .peerURLs of type {of}",
            go_kind(what)
        ))
    };
    let urls: Vec<String> = match field {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|u| match u {
                serde_json::Value::String(s) => Ok(s.clone()),
                // Go leaves a string it reads null into empty.
                serde_json::Value::Null => Ok(String::new()),
                other => Err(refuse(other, "string")),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(refuse(other, "[]string")),
    };
    // etcd's `types.NewURLs`.
    if urls.is_empty() {
        return Err(Refusal::bad_request("no valid URLs given".into()));
    }
    for u in &urls {
        check_url(u).map_err(Refusal::bad_request)?;
    }
    Ok(urls)
}

/// How Go's encoding/json names a JSON value's kind in its type errors.
fn go_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// etcd's `types.NewURLs` checks of one URL.
fn check_url(u: &str) -> Result<(), String> {
    let Some((scheme, rest)) = u.split_once("://") else {
        return Err(format!(
            "URL scheme must be http, https, unix, or unixs: {u}"
        ));
    };
    if !matches!(scheme, "http" | "https" | "unix" | "unixs") {
        return Err(format!(
            "URL scheme must be http, https, unix, or unixs: {u}"
        ));
    }
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if !host.contains(':') {
        return Err(format!(
            "URL address does not have the form \"host:port\": {u}"
        ));
    }
    if !path.is_empty() {
        return Err(format!("URL must not contain a path: {u}"));
    }
    Ok(())
}

/// The first syntax error in `body` as Go's JSON decoder words it (the common cases).
fn go_json_error(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let t = text.trim_start();
    let Some(first) = t.chars().next() else {
        return "EOF".into();
    };
    for (word, name) in [("null", "null"), ("true", "true"), ("false", "false")] {
        if first == word.chars().next().unwrap_or(' ') {
            for (got, want) in t.chars().skip(1).zip(word.chars().skip(1)) {
                if got != want {
                    return format!(
                        "invalid character '{got}' in literal {name} (expecting '{want}')"
                    );
                }
            }
        }
    }
    if !matches!(first, '{' | '[' | '"' | '-' | '0'..='9' | 'n' | 't' | 'f') {
        return format!("invalid character '{first}' looking for beginning of value");
    }
    "unexpected end of JSON input".into()
}

#[cfg(test)]
#[path = "members_tests.rs"]
mod tests;
