//! The store's operations one by one, the dispatch of committed requests,
//! in-order keys, hidden keys and the counters.

use actcd_v2tree::{
    Counters, Store, TtlOptions, UNKNOWN_METHOD_CAUSE, V2Error, V2Request, parse_key_request,
};

type Params = &'static [(&'static str, &'static str)];

fn req(method: &str, path: &str, params: &[(&str, &str)]) -> V2Request {
    req_at(method, path, params, 0)
}

fn req_at(method: &str, path: &str, params: &[(&str, &str)], now: i64) -> V2Request {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    parse_key_request(method, path, &params, now)
        .expect("parse")
        .request
}

fn code(r: Result<actcd_v2tree::Event, V2Error>) -> Result<(String, u64), (u32, String, u64)> {
    r.map(|e| (e.action, e.etcd_index))
        .map_err(|e| (e.code, e.cause, e.index))
}

#[test]
fn want_ops_outcomes() {
    let mut s = Store::new();
    let none = TtlOptions::none();
    let ok = |a: &str, i: u64| Ok((a.to_owned(), i));
    let err = |c: u32, cause: &str, i: u64| Err((c, cause.to_owned(), i));
    assert_eq!(code(s.set("/a/b", false, "1", none, 0)), ok("set", 1));
    assert_eq!(code(s.set("/a", false, "1", none, 0)), err(102, "/a", 1));
    assert_eq!(
        code(s.set("/a/b/c", false, "1", none, 0)),
        err(104, "/a/b", 1)
    );
    assert_eq!(code(s.set("/", false, "1", none, 0)), err(107, "/", 1));
    assert_eq!(
        code(s.create("/a/b", false, "1", false, none, 0)),
        err(105, "/a/b", 1)
    );
    assert_eq!(
        code(s.create("/a/c", true, "", false, none, 0)),
        ok("create", 2)
    );
    assert_eq!(
        code(s.create("/a/b/x", false, "", false, none, 0)),
        err(104, "/a/b", 2)
    );
    assert_eq!(
        code(s.create("/", false, "", false, none, 0)),
        err(107, "/", 2)
    );
    assert_eq!(code(s.update("/a/b", "2", none, 0)), ok("update", 3));
    assert_eq!(code(s.update("/a/x", "2", none, 0)), err(100, "/a/x", 3));
    assert_eq!(code(s.update("/a", "2", none, 0)), err(102, "/a", 3));
    assert_eq!(code(s.update("/", "", none, 0)), err(107, "/", 3));
    assert_eq!(
        code(s.compare_and_swap("/a/b", "2", 3, "3", none, 0)),
        ok("compareAndSwap", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/a/b", "2", 0, "3", none, 0)),
        err(101, "[2 != 3]", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/a/b", "", 9, "3", none, 0)),
        err(101, "[9 != 4]", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/a/b", "x", 9, "3", none, 0)),
        err(101, "[x != 3] [9 != 4]", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/a", "x", 0, "3", none, 0)),
        err(102, "/a", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/", "x", 0, "3", none, 0)),
        err(107, "/", 4)
    );
    assert_eq!(
        code(s.compare_and_swap("/zz", "x", 0, "3", none, 0)),
        err(100, "/zz", 4)
    );
    assert_eq!(
        code(s.compare_and_delete("/a/b", "x", 0, 0)),
        err(101, "[x != 3]", 4)
    );
    assert_eq!(
        code(s.compare_and_delete("/a", "x", 0, 0)),
        err(102, "/a", 4)
    );
    // etcd reports the root here with an empty cause (its "/1", trimmed).
    assert_eq!(code(s.compare_and_delete("/", "x", 0, 0)), err(102, "", 4));
    assert_eq!(
        code(s.compare_and_delete("/a/b", "3", 4, 0)),
        ok("compareAndDelete", 5)
    );
    assert_eq!(code(s.delete("/a/b", false, false, 0)), err(100, "/a/b", 5));
    assert_eq!(code(s.delete("/a", false, false, 0)), err(102, "/a", 5));
    assert_eq!(code(s.delete("/a", true, false, 0)), err(108, "/a", 5));
    assert_eq!(code(s.delete("/a/c", true, false, 0)), ok("delete", 6));
    assert_eq!(code(s.delete("/", true, true, 0)), err(107, "/", 6));
    assert_eq!(code(s.delete("/a", false, true, 0)), ok("delete", 7));
    assert_eq!(code(s.get("/a", false, false, 0)), err(100, "/a", 7));
    assert_eq!(code(s.get("/", false, false, 0)), ok("get", 7));
    assert_eq!(s.index(), 7);
}

#[test]
fn want_in_order_keys() {
    let mut s = Store::new();
    s.set("/other", false, "x", TtlOptions::none(), 0)
        .expect("set");
    let a = s
        .create("/q", false, "a", true, TtlOptions::none(), 0)
        .expect("post");
    let b = s
        .create("/q/", false, "b", true, TtlOptions::none(), 0)
        .expect("post");
    let c = s
        .create("/", false, "c", true, TtlOptions::none(), 0)
        .expect("post");
    assert_eq!(a.node.key, "/q/00000000000000000002");
    assert_eq!(b.node.key, "/q/00000000000000000003");
    assert_eq!(c.node.key, "/00000000000000000004");
    let list = s.get("/q", false, true, 0).expect("get");
    let keys: Vec<&str> = list.node.nodes.iter().map(|n| n.key.as_str()).collect();
    assert_eq!(keys, ["/q/00000000000000000002", "/q/00000000000000000003"]);
}

#[test]
fn want_hidden_keys_out_of_listings_only() {
    let mut s = Store::new();
    for p in ["/_h", "/d/_h", "/d/v", "/_hd/x"] {
        s.set(p, false, "x", TtlOptions::none(), 0).expect("set");
    }
    let root = s.get("/", true, true, 0).expect("get");
    assert_eq!(
        root.to_json(),
        r#"{"action":"get","node":{"dir":true,"nodes":[{"key":"/d","dir":true,"nodes":[{"key":"/d/v","value":"x","modifiedIndex":3,"createdIndex":3}],"modifiedIndex":2,"createdIndex":2}]}}"#
    );
    assert_eq!(
        s.get("/_h", false, false, 0)
            .expect("get")
            .node
            .value
            .as_deref(),
        Some("x")
    );
    let hd = s.get("/_hd", false, false, 0).expect("get");
    assert_eq!(hd.node.nodes.len(), 1);
}

#[test]
fn want_apply_dispatch() {
    let mut s = Store::new();
    let cases: &[(&str, &str, Params, Result<&str, u32>)] = &[
        ("PUT", "/k", &[("value", "1")], Ok("set")),
        (
            "PUT",
            "/k",
            &[("value", "2"), ("prevExist", "true")],
            Ok("update"),
        ),
        (
            "PUT",
            "/k",
            &[("value", "3"), ("prevExist", "true"), ("prevValue", "2")],
            Ok("compareAndSwap"),
        ),
        (
            "PUT",
            "/k",
            &[("value", "4"), ("prevExist", "true"), ("prevIndex", "3")],
            Ok("compareAndSwap"),
        ),
        (
            "PUT",
            "/k",
            &[("value", "5"), ("prevIndex", "4")],
            Ok("compareAndSwap"),
        ),
        (
            "PUT",
            "/k",
            &[("value", "6"), ("prevValue", "5")],
            Ok("compareAndSwap"),
        ),
        (
            "PUT",
            "/k",
            &[("value", "7"), ("prevExist", "false")],
            Err(105),
        ),
        (
            "PUT",
            "/n",
            &[("value", "7"), ("prevExist", "false")],
            Ok("create"),
        ),
        (
            "PUT",
            "/d",
            &[("dir", "true"), ("prevExist", "false")],
            Ok("create"),
        ),
        ("POST", "/d", &[("value", "x")], Ok("create")),
        ("GET", "/k", &[("quorum", "true")], Ok("get")),
        (
            "DELETE",
            "/k",
            &[("prevValue", "6")],
            Ok("compareAndDelete"),
        ),
        ("DELETE", "/n", &[("prevIndex", "1")], Err(101)),
        ("DELETE", "/n", &[], Ok("delete")),
        ("DELETE", "/d", &[("dir", "true")], Err(108)),
        ("DELETE", "/d", &[("recursive", "true")], Ok("delete")),
    ];
    for (i, (method, path, params, want)) in cases.iter().enumerate() {
        let got = s.apply(&req(method, path, params), 0);
        match (got, want) {
            (Ok(e), Ok(action)) => assert_eq!(e.action, *action, "case {i}"),
            (Err(e), Err(c)) => assert_eq!(e.code, *c, "case {i}"),
            (got, want) => panic!("case {i}: got {got:?}, want {want:?}"),
        }
    }
    // AUTH and anything else is not this store's.
    let mut auth = req("PUT", "/x", &[]);
    auth.method = "AUTH".to_owned();
    let e = s.apply(&auth, 0).expect_err("unknown");
    assert_eq!(
        (e.code, e.cause.as_str(), e.index),
        (300, UNKNOWN_METHOD_CAUSE, 0)
    );
    assert_eq!(e.http_status(), 500);
    // SYNC expires up to its time.
    s.set(
        "/t",
        false,
        "x",
        TtlOptions::expire_at(2_000_000_000_000_000_000),
        0,
    )
    .expect("set");
    let mut sync = V2Request {
        method: "SYNC".to_owned(),
        time: 2_000_000_000_000_000_000,
        ..V2Request::default()
    };
    let e = s.apply(&sync, 0).expect("sync");
    assert_eq!((e.action.as_str(), e.etcd_index), ("sync", s.index()));
    assert!(s.get("/t", false, false, 0).is_err());
    sync.time += 1;
    assert!(matches!(
        s.apply_full(&sync, 0),
        Ok(actcd_v2tree::Applied::Synced(v)) if v.is_empty()
    ));
}

/// The same requests made to etcd 3.4.23 moved its counters by these
/// amounts (`/v2/stats/store` before and after; the reads etcd makes for
/// itself are left out), quirks included: refusals of the root by
/// update, compare-and-swap and delete, an update of a directory with a
/// value, and failed compare-and-deletes count as successes; a create under
/// a file counts a failed set as well.
#[test]
fn want_etcd_counters() {
    let mut s = Store::new();
    let reqs: &[(&str, &str, Params)] = &[
        ("PUT", "/s/a", &[("value", "1")]),
        ("PUT", "/s/a/b", &[("value", "1")]),
        ("PUT", "/s/a", &[("prevExist", "false"), ("value", "2")]),
        ("PUT", "/s/a/x", &[("prevExist", "false"), ("value", "2")]),
        ("POST", "/s/q", &[("value", "1")]),
        ("PUT", "/s/a", &[("prevExist", "true"), ("value", "3")]),
        ("PUT", "/s/nope", &[("prevExist", "true"), ("value", "3")]),
        ("PUT", "/", &[("prevExist", "true"), ("value", "1")]),
        ("PUT", "/s", &[("prevExist", "true"), ("value", "x")]),
        ("PUT", "/s/a", &[("prevValue", "3"), ("value", "4")]),
        ("PUT", "/s/a", &[("prevValue", "zz"), ("value", "4")]),
        ("PUT", "/", &[("prevValue", "zz")]),
        ("DELETE", "/s/a", &[("prevValue", "zz")]),
        ("DELETE", "/s", &[("prevValue", "zz")]),
        ("DELETE", "/s/nope", &[("prevValue", "zz")]),
        ("DELETE", "/s/a", &[("prevValue", "4")]),
        ("DELETE", "/", &[]),
        ("DELETE", "/s", &[]),
        ("DELETE", "/s", &[("recursive", "true")]),
        ("DELETE", "/s", &[]),
        ("PUT", "/s2", &[("value", "1"), ("ttl", "0")]),
    ];
    let now = 1_800_000_000_000_000_000;
    for (method, path, params) in reqs {
        let _ = s.apply(&req_at(method, path, params, now), now);
    }
    let _ = s.get("/nope", false, false, now);
    let _ = s.get("/s2", false, false, now);
    let _ = s.sync(now);
    let _ = s.get("/s2", false, false, now);
    assert_eq!(
        s.stats(),
        Counters {
            gets_success: 1,
            gets_fail: 2,
            sets_success: 2,
            sets_fail: 2,
            delete_success: 2,
            delete_fail: 2,
            update_success: 3,
            update_fail: 1,
            create_success: 1,
            create_fail: 2,
            compare_and_swap_success: 2,
            compare_and_swap_fail: 1,
            compare_and_delete_success: 3,
            compare_and_delete_fail: 1,
            expire_count: 1,
            watchers: 0,
        }
    );
    assert_eq!(
        s.stats_json(),
        r#"{"getsSuccess":1,"getsFail":2,"setsSuccess":2,"setsFail":2,"deleteSuccess":2,"deleteFail":2,"updateSuccess":3,"updateFail":1,"createSuccess":1,"createFail":2,"compareAndSwapSuccess":2,"compareAndSwapFail":1,"compareAndDeleteSuccess":3,"compareAndDeleteFail":1,"expireCount":1,"watchers":0}"#
    );
}
