//! Tests of the front's `http/health.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

#[test]
fn paths_name_a_family_and_maybe_one_check() {
    assert_eq!(Kind::route("/livez"), Some((Kind::Livez, None)));
    assert_eq!(
        Kind::route("/readyz/non_learner"),
        Some((Kind::Readyz, Some("non_learner")))
    );
    assert_eq!(Kind::route("/livez/non_learner"), None);
    assert_eq!(Kind::route("/readyz/"), None);
    assert_eq!(Kind::route("/readyzz"), None);
    assert_eq!(Kind::route("/health"), None);
}

/// etcd 3.6's bodies, as its `newHealthHandler` writes them.
#[test]
fn answers_read_as_etcds() {
    let ok = |n| (n, Ok(()));
    assert_eq!(
        answer(&[ok("serializable_read")], false),
        Answer {
            ok: true,
            body: "ok\n".into()
        }
    );
    assert_eq!(
        answer(&[ok("data_corruption"), ok("non_learner")], true).body,
        "[+]data_corruption ok\n[+]non_learner ok\nok\n"
    );
    let failed = answer(
        &[
            ok("data_corruption"),
            ("linearizable_read", Err("etcdserver: no leader".into())),
        ],
        false,
    );
    assert!(!failed.ok);
    assert_eq!(
        failed.body,
        "[+]data_corruption ok\n[-]linearizable_read failed: etcdserver: no leader\n\n"
    );
}

/// etcd's handlers read `r.URL.Query()`: Go's `url.ParseQuery`.
#[test]
fn queries_are_read_as_gos_url_parse_query_reads_them() {
    let q = |raw| go_query(raw);
    assert_eq!(
        q("exclude=data%5Fcorruption&exclude=non%5flearner&verbose"),
        [
            ("exclude".into(), "data_corruption".into()),
            ("exclude".into(), "non_learner".into()),
            ("verbose".into(), String::new()),
        ]
    );
    assert_eq!(
        q("a+b=c+d&&x=%7A"),
        [("a b".into(), "c d".into()), ("x".into(), "z".into())]
    );
    // A bad escape drops its pair; so does a `;` (Go 1.17+), even inside a value.
    assert_eq!(q("exclude=%zz&verbose;x&exclude=%4"), []);
    assert_eq!(
        q("verbose=1;2&exclude=a=b"),
        [("exclude".into(), "a=b".into())]
    );
    assert_eq!(q(""), []);
}

#[test]
fn exclude_drops_checks_and_a_sub_path_runs_one() {
    assert_eq!(
        selected(Kind::Readyz, None, &["linearizable_read", "nope"]),
        vec!["data_corruption", "serializable_read", "non_learner"]
    );
    assert_eq!(
        selected(Kind::Readyz, Some("non_learner"), &["non_learner"]),
        vec!["non_learner"]
    );
}
