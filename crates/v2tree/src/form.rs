//! A v2 request's URL and form as Go's `net/http` and `net/url` read them: the path cleaned as
//! `ServeMux` cleans it ([`mux_clean_path`]) and percent-decoded ([`percent_decode`]), the
//! form values of the body and the query in `r.Form` order ([`parse_form`]), with
//! `url.ParseQuery`'s refusal of a bad escape in its words.

/// Go's `path.Clean` as `ServeMux` applies it to a request path: empty, `.` and `..`
/// segments resolved, repeated slashes folded, a trailing slash kept. (A store key is cleaned
/// by [`crate::clean_path`], which drops the trailing slash.)
pub fn mux_clean_path(p: &str) -> String {
    let mut out = crate::clean_path(p);
    if p.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

/// Go's `html.EscapeString`: how `http.Redirect` writes a location into its little HTML body.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// Decodes `%XX` escapes (a path: `+` stays `+`). A `%` that does not start an escape is
/// kept; bytes that are not UTF-8 become U+FFFD.
pub fn percent_decode(s: &str) -> String {
    decode(s, false)
}

fn decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `application/x-www-form-urlencoded` pairs, in order (`&` and `;` separate pairs, `+` is a
/// space, a name without `=` has an empty value).
pub fn form_pairs(s: &str) -> Vec<(String, String)> {
    s.split(['&', ';'])
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k, true), decode(v, true)),
            None => (decode(p, true), String::new()),
        })
        .collect()
}

/// The first bad `%` escape in `s`, as Go's `url.ParseQuery` reports it.
fn bad_escape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok =
                i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
            if !ok {
                let end = (i + 3).min(b.len());
                return Some(format!(
                    "invalid URL escape {}",
                    serde_json::Value::String(String::from_utf8_lossy(&b[i..end]).into_owned())
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    None
}

/// Go's `r.Form` for a request with `method` (`"PUT"`, …), `content_type`, `body` and the raw
/// `query`: the body's form values (PUT/POST/PATCH with a form content type, or none), then the
/// query's; `Err` is Go's `ParseForm` error (a bad escape, the body's first).
pub fn parse_form(
    method: &str,
    content_type: Option<&str>,
    body: &[u8],
    query: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let body_form = matches!(method, "PUT" | "POST" | "PATCH")
        && content_type.is_none_or(|t| t.starts_with("application/x-www-form-urlencoded"));
    if body_form {
        let body = String::from_utf8_lossy(body);
        if let Some(e) = bad_escape(&body) {
            return Err(e);
        }
        out.extend(form_pairs(&body));
    }
    if let Some(e) = bad_escape(query) {
        return Err(e);
    }
    out.extend(form_pairs(query));
    Ok(out)
}

#[cfg(test)]
#[path = "form_tests.rs"]
mod tests;
