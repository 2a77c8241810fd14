//! Tests of `form.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

#[test]
fn paths_are_cleaned_as_go_does() {
    for (given, want) in [
        ("/v2/keys/a", "/v2/keys/a"),
        ("/v2/keys//a", "/v2/keys/a"),
        ("/v2/keys/a/../b", "/v2/keys/b"),
        ("/v2/keys/./a", "/v2/keys/a"),
        ("/v2/keys/a/", "/v2/keys/a/"),
        ("", "/"),
        ("/..", "/"),
    ] {
        assert_eq!(mux_clean_path(given), want, "{given}");
    }
    assert_eq!(
        html_escape(r#"/v2/keys/<a>&"b'"#),
        "/v2/keys/&lt;a&gt;&amp;&#34;b&#39;"
    );
}

#[test]
fn forms_decode_plus_and_escapes() {
    assert_eq!(
        form_pairs("value=a+b%2Fc&ttl=&x"),
        vec![
            ("value".into(), "a b/c".into()),
            ("ttl".into(), String::new()),
            ("x".into(), String::new())
        ]
    );
    assert_eq!(percent_decode("/v2/keys/a%20b+c"), "/v2/keys/a b+c");
    assert_eq!(percent_decode("/v2/keys/100%"), "/v2/keys/100%");
    assert_eq!(percent_decode("/v2/keys/%zz"), "/v2/keys/%zz");
    assert_eq!(percent_decode("/v2/keys/%ff"), "/v2/keys/\u{FFFD}");
}

#[test]
fn the_body_form_comes_first_and_bad_escapes_are_gos_errors() {
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        parse_form("PUT", None, b"value=body", "value=query"),
        Ok(pairs(&[("value", "body"), ("value", "query")]))
    );
    assert_eq!(
        parse_form("GET", None, b"value=body", "recursive=true"),
        Ok(pairs(&[("recursive", "true")])),
        "a GET's body is not read"
    );
    assert_eq!(
        parse_form("POST", Some("application/json"), b"value=body", ""),
        Ok(vec![]),
        "another content type's body is not a form"
    );
    assert_eq!(
        parse_form(
            "PATCH",
            Some("application/x-www-form-urlencoded; charset=utf-8"),
            b"a=1",
            ""
        ),
        Ok(pairs(&[("a", "1")]))
    );
    assert_eq!(
        parse_form("PUT", None, b"value=%zz", ""),
        Err(r#"invalid URL escape "%zz""#.to_string())
    );
    assert_eq!(
        parse_form("GET", None, b"", "a=%4"),
        Err(r#"invalid URL escape "%4""#.to_string())
    );
}
