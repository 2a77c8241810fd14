//! Parsing `/v2/keys` requests: field values, defaults and every error.

use actcd_v2tree::{KeyRequest, V2Error, parse_key_request};

type Params = &'static [(&'static str, &'static str)];

const NOW: i64 = 1_800_000_000_000_000_000;

fn parse(method: &str, path: &str, params: &[(&str, &str)]) -> Result<KeyRequest, V2Error> {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    parse_key_request(method, path, &params, NOW)
}

#[test]
fn want_parse_errors() {
    // (method, params, code, cause); the messages and statuses come from
    // the code (see errors.rs), and etcd 3.4.23 answered these (see
    // etcd_http.rs for the bytes of most of them).
    let cases: &[(&str, Params, u32, &str)] = &[
        (
            "GET",
            &[("prevIndex", "abc")],
            203,
            "invalid value for \"prevIndex\"",
        ),
        (
            "GET",
            &[("prevIndex", "+5")],
            203,
            "invalid value for \"prevIndex\"",
        ),
        (
            "GET",
            &[("prevIndex", "")],
            203,
            "invalid value for \"prevIndex\"",
        ),
        (
            "GET",
            &[("prevIndex", "18446744073709551616")],
            203,
            "invalid value for \"prevIndex\"",
        ),
        (
            "GET",
            &[("waitIndex", "-1")],
            203,
            "invalid value for \"waitIndex\"",
        ),
        (
            "GET",
            &[("recursive", "yes")],
            209,
            "invalid value for \"recursive\"",
        ),
        (
            "GET",
            &[("sorted", "")],
            209,
            "invalid value for \"sorted\"",
        ),
        (
            "GET",
            &[("wait", "tRUE")],
            209,
            "invalid value for \"wait\"",
        ),
        ("PUT", &[("dir", "2")], 209, "invalid value for \"dir\""),
        (
            "GET",
            &[("quorum", "no")],
            209,
            "invalid value for \"quorum\"",
        ),
        (
            "GET",
            &[("stream", "y")],
            209,
            "invalid value for \"stream\"",
        ),
        (
            "PUT",
            &[("wait", "true")],
            209,
            "\"wait\" can only be used with GET requests",
        ),
        (
            "HEAD",
            &[("wait", "true")],
            209,
            "\"wait\" can only be used with GET requests",
        ),
        (
            "PUT",
            &[("prevValue", "")],
            201,
            "\"prevValue\" cannot be empty",
        ),
        (
            "PUT",
            &[("noValueOnSuccess", "x")],
            209,
            "invalid value for \"noValueOnSuccess\"",
        ),
        ("PUT", &[("ttl", "abc")], 202, "invalid value for \"ttl\""),
        ("PUT", &[("ttl", "-1")], 202, "invalid value for \"ttl\""),
        (
            "PUT",
            &[("prevExist", "abc")],
            209,
            "invalid value for prevExist",
        ),
        (
            "PUT",
            &[("prevExist", "")],
            209,
            "invalid value for prevExist",
        ),
        (
            "PUT",
            &[("refresh", "abc")],
            209,
            "invalid value for refresh",
        ),
        (
            "PUT",
            &[("refresh", "true"), ("value", "v")],
            211,
            "A value was provided on a refresh",
        ),
        ("PUT", &[("refresh", "true")], 212, "No TTL value set"),
        (
            "PUT",
            &[("refresh", "true"), ("ttl", "")],
            212,
            "No TTL value set",
        ),
        // The first error in etcd's order wins.
        (
            "PUT",
            &[("recursive", "x"), ("prevIndex", "x")],
            203,
            "invalid value for \"prevIndex\"",
        ),
        (
            "PUT",
            &[("ttl", "x"), ("dir", "x")],
            209,
            "invalid value for \"dir\"",
        ),
    ];
    for (method, params, code, cause) in cases {
        let e = parse(method, "/k", params).expect_err("should fail");
        assert_eq!(
            (e.code, e.cause.as_str(), e.index),
            (*code, *cause, 0),
            "{method} {params:?}"
        );
    }
}

#[test]
fn want_parsed_fields() {
    let kr = parse(
        "PUT",
        "/a//b/",
        &[
            ("value", "first"),
            ("value", "second"),
            ("dir", "T"),
            ("prevValue", "p"),
            ("prevIndex", "007"),
            ("prevExist", "1"),
            ("ttl", "30"),
            ("recursive", "TRUE"),
            ("sorted", "True"),
            ("noValueOnSuccess", "t"),
            ("refresh", "false"),
        ],
    )
    .expect("parse");
    let r = &kr.request;
    assert_eq!(r.method, "PUT");
    assert_eq!(r.path, "/a/b");
    assert_eq!(r.val, "first");
    assert!(r.dir && r.recursive && r.sorted && !r.wait && !r.stream && !r.quorum);
    assert_eq!(r.prev_value, "p");
    assert_eq!(r.prev_index, 7);
    assert_eq!(r.prev_exist, Some(true));
    assert_eq!(r.refresh, Some(false));
    assert_eq!(r.expiration, NOW + 30_000_000_000);
    assert_eq!((r.id, r.time), (0, 0));
    assert!(kr.no_value_on_success);
    assert!(kr.needs_proposal() && !kr.is_watch() && !kr.is_local_read());
}

#[test]
fn want_defaults_and_kinds() {
    let cases: &[(&str, Params, &str, bool, bool, bool)] = &[
        // (method, params, method after parsing, watch, local read, proposal)
        ("GET", &[], "GET", false, true, false),
        ("HEAD", &[], "HEAD", false, true, false),
        ("GET", &[("wait", "true")], "GET", true, false, false),
        ("GET", &[("quorum", "true")], "QGET", false, false, true),
        // quorum wins over wait, as in etcd: a quorum read, not a watch.
        (
            "GET",
            &[("quorum", "1"), ("wait", "1")],
            "QGET",
            false,
            false,
            true,
        ),
        ("HEAD", &[("quorum", "true")], "HEAD", false, true, false),
        ("POST", &[], "POST", false, false, true),
        ("DELETE", &[], "DELETE", false, false, true),
    ];
    for (method, params, want_method, watch, local, proposal) in cases {
        let kr = parse(method, "", params).expect("parse");
        assert_eq!(kr.request.method, *want_method);
        assert_eq!(kr.request.path, "/");
        assert_eq!(
            (kr.is_watch(), kr.is_local_read(), kr.needs_proposal()),
            (*watch, *local, *proposal),
            "{method} {params:?}"
        );
        assert_eq!(kr.request.prev_exist, None);
        assert_eq!(kr.request.refresh, None);
        assert_eq!(kr.request.expiration, 0);
    }
}

#[test]
fn want_ttl_encoding() {
    // No ttl or an empty one: no expiration (permanent); 0: now.
    let cases: &[(Params, i64)] = &[
        (&[], 0),
        (&[("ttl", "")], 0),
        (&[("ttl", "0")], NOW),
        (&[("ttl", "5")], NOW + 5_000_000_000),
        (&[("ttl", ""), ("ttl", "5")], 0),
        (
            &[("refresh", "true"), ("ttl", "9"), ("value", "")],
            NOW + 9_000_000_000,
        ),
    ];
    for (params, want) in cases {
        let kr = parse("PUT", "/k", params).expect("parse");
        assert_eq!(kr.request.expiration, *want, "{params:?}");
    }
    let kr = parse(
        "GET",
        "/k",
        &[("waitIndex", "12"), ("stream", "true"), ("wait", "true")],
    )
    .expect("parse");
    assert_eq!((kr.request.since, kr.request.stream), (12, true));
}
