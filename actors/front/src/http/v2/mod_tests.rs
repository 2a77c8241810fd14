//! Tests of the front's `http/v2/mod.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

#[test]
fn paths_are_cleaned_as_go_does() {
    for (given, want) in [
        ("/v2/keys/a", "/v2/keys/a"),
        ("/v2/keys//a", "/v2/keys/a"),
        ("/v2/keys/a/../b", "/v2/keys/b"),
        ("/v2/keys/./a", "/v2/keys/a"),
        ("/v2/keys/a/", "/v2/keys/a/"),
    ] {
        assert_eq!(clean_path(given), want, "{given}");
    }
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
}
