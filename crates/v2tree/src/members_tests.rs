//! Tests of `members.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

const JSON: Option<&str> = Some("application/json");

fn refused(status: u16, message: &str) -> Result<Vec<String>, Refusal> {
    Err(Refusal {
        status,
        message: message.to_string(),
    })
}

#[test]
fn a_member_is_written_as_etcd_writes_it() {
    assert_eq!(
        member_json(0x8e9e05c52164694d, "m1", &["http://a:2380".into()], &[]),
        r#"{"id":"8e9e05c52164694d","name":"m1","peerURLs":["http://a:2380"],"clientURLs":[]}"#
    );
}

#[test]
fn peer_urls_are_read_as_etcd_reads_them() {
    assert_eq!(
        peer_urls(
            JSON,
            br#"{"peerURLs":["http://10.0.0.1:2380","unix://s:1"]}"#
        ),
        Ok(vec!["http://10.0.0.1:2380".into(), "unix://s:1".into()])
    );
    assert_eq!(
        peer_urls(
            Some("application/json; charset=utf-8"),
            br#"{"PEERurls":["http://a:1"]}"#
        ),
        Ok(vec!["http://a:1".into()]),
        "any case, as Go matches a field"
    );
    assert_eq!(
        peer_urls(Some("text/plain"), b"{}"),
        refused(415, "Bad Content-Type text/plain, accept application/json")
    );
    assert_eq!(
        peer_urls(None, b"{}"),
        refused(415, "Bad Content-Type , accept application/json")
    );
    assert_eq!(peer_urls(JSON, b"{}"), refused(400, "no valid URLs given"));
    assert_eq!(
        peer_urls(JSON, br#"{"peerURLs":null}"#),
        refused(400, "no valid URLs given")
    );
}

#[test]
fn values_of_another_type_are_refused_in_gos_words() {
    assert_eq!(
        peer_urls(JSON, br#"{"peerURLs":["http://a:1",2]}"#),
        refused(
            400,
            "json: cannot unmarshal number into Go struct field .peerURLs of type string"
        )
    );
    assert_eq!(
        peer_urls(JSON, br#"{"peerURLs":"http://a:1"}"#),
        refused(
            400,
            "json: cannot unmarshal string into Go struct field .peerURLs of type []string"
        )
    );
    assert_eq!(
        peer_urls(JSON, br#"{"peerURLs":[null]}"#),
        refused(400, "URL scheme must be http, https, unix, or unixs: "),
        "null reads as an empty string"
    );
}

#[test]
fn syntax_errors_are_in_gos_words() {
    for (body, want) in [
        (&b""[..], "EOF"),
        (b"  ", "EOF"),
        (b"nul", "unexpected end of JSON input"),
        (
            b"nulx",
            "invalid character 'x' in literal null (expecting 'l')",
        ),
        (
            b"tru3",
            "invalid character '3' in literal true (expecting 'e')",
        ),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b"{\"peerURLs\":", "unexpected end of JSON input"),
    ] {
        assert_eq!(peer_urls(JSON, body), refused(400, want), "{body:?}");
    }
}

#[test]
fn urls_are_checked_as_types_new_urls_checks_them() {
    for (url, want) in [
        ("http://a:1", Ok(())),
        ("https://[::1]:2380", Ok(())),
        (
            "ftp://a:1",
            Err("URL scheme must be http, https, unix, or unixs: ftp://a:1"),
        ),
        (
            "a:1",
            Err("URL scheme must be http, https, unix, or unixs: a:1"),
        ),
        (
            "http://a",
            Err("URL address does not have the form \"host:port\": http://a"),
        ),
        (
            "http://a:1/p",
            Err("URL must not contain a path: http://a:1/p"),
        ),
    ] {
        assert_eq!(check_url(url), want.map_err(str::to_string), "{url}");
    }
}
