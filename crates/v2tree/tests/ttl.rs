//! TTLs: expirations and remaining seconds in the JSON, refresh rules,
//! removal of a TTL, and expiry (with its events).

use actcd_v2tree::{ACTION_EXPIRE, Store, TtlOptions, V2Error, WatchStart, parse_key_request};

type Params = &'static [(&'static str, &'static str)];

const SEC: i64 = 1_000_000_000;

fn pad(store: &mut Store, to: u64) {
    while store.index() < to {
        store
            .set("/_pad", false, "x", TtlOptions::none(), 0)
            .expect("pad");
    }
}

fn put(
    store: &mut Store,
    path: &str,
    params: &[(&str, &str)],
    now: i64,
) -> Result<String, V2Error> {
    let params: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let kr = parse_key_request("PUT", path, &params, now)?;
    store.apply(&kr.request, now).map(|e| e.to_json())
}

/// Replays, at the same instants, requests made to etcd 3.4.23 (started as
/// in `etcd_http.rs`): `curl -XPUT $E/t2 -d value=a -d ttl=100` and so on.
/// Each request's `now` is the instant etcd stamped it (its expiration less
/// its TTL).
#[test]
fn want_etcd_ttl_bytes() {
    let t2_exp = 1_795_619_469_442_078_801; // 2026-11-25T15:11:09.442078801Z
    let t3_exp1 = 1_795_619_419_497_693_035;
    let t3_exp2 = 1_795_619_429_518_063_385;
    let t3_exp3 = 1_795_619_439_538_003_083;
    let t3_exp4 = 1_795_619_439_552_447_291;
    let t3_zero = 1_795_619_369_569_888_596;
    let cases: &[(&str, Params, i64, &str)] = &[
        (
            "/t2",
            &[("value", "a"), ("ttl", "100")],
            t2_exp - 100 * SEC,
            r#"{"action":"set","node":{"key":"/t2","value":"a","expiration":"2026-11-25T15:11:09.442078801Z","ttl":100,"modifiedIndex":23,"createdIndex":23}}"#,
        ),
        // An update without a ttl drops the TTL.
        (
            "/t2",
            &[("prevExist", "true"), ("value", "b")],
            t2_exp - 100 * SEC + SEC / 50,
            r#"{"action":"update","node":{"key":"/t2","value":"b","modifiedIndex":24,"createdIndex":23},"prevNode":{"key":"/t2","value":"a","expiration":"2026-11-25T15:11:09.442078801Z","ttl":100,"modifiedIndex":23,"createdIndex":23}}"#,
        ),
        (
            "/t2",
            &[("prevExist", "true"), ("ttl", ""), ("value", "b")],
            t2_exp - 99 * SEC,
            r#"{"action":"update","node":{"key":"/t2","value":"b","modifiedIndex":25,"createdIndex":23},"prevNode":{"key":"/t2","value":"b","modifiedIndex":24,"createdIndex":23}}"#,
        ),
        (
            "/t3",
            &[("ttl", "50"), ("value", "a")],
            t3_exp1 - 50 * SEC,
            r#"{"action":"set","node":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:19.497693035Z","ttl":50,"modifiedIndex":26,"createdIndex":26}}"#,
        ),
        (
            "/t3",
            &[("ttl", "60"), ("refresh", "true"), ("prevExist", "true")],
            t3_exp2 - 60 * SEC,
            r#"{"action":"update","node":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:29.518063385Z","ttl":60,"modifiedIndex":27,"createdIndex":26},"prevNode":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:19.497693035Z","ttl":50,"modifiedIndex":26,"createdIndex":26}}"#,
        ),
        // A refresh through a plain set makes a new node (new createdIndex).
        (
            "/t3",
            &[("ttl", "70"), ("refresh", "true")],
            t3_exp3 - 70 * SEC,
            r#"{"action":"set","node":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:39.538003083Z","ttl":70,"modifiedIndex":28,"createdIndex":28},"prevNode":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:29.518063385Z","ttl":60,"modifiedIndex":27,"createdIndex":26}}"#,
        ),
        (
            "/t3",
            &[("ttl", "70"), ("refresh", "true"), ("prevValue", "a")],
            t3_exp4 - 70 * SEC,
            r#"{"action":"compareAndSwap","node":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:39.552447291Z","ttl":70,"modifiedIndex":29,"createdIndex":28},"prevNode":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:39.538003083Z","ttl":70,"modifiedIndex":28,"createdIndex":28}}"#,
        ),
        // ttl=0 expires now: the expiration is shown, the ttl (0) is not.
        (
            "/t3",
            &[("ttl", "0"), ("value", "z")],
            t3_zero,
            r#"{"action":"set","node":{"key":"/t3","value":"z","expiration":"2026-11-25T15:09:29.569888596Z","modifiedIndex":30,"createdIndex":30},"prevNode":{"key":"/t3","value":"a","expiration":"2026-11-25T15:10:39.552447291Z","ttl":70,"modifiedIndex":29,"createdIndex":28}}"#,
        ),
    ];
    let mut store = Store::new();
    pad(&mut store, 22);
    for (i, (path, params, now, want)) in cases.iter().enumerate() {
        assert_eq!(
            put(&mut store, path, params, *now).as_deref(),
            Ok(*want),
            "case {i}"
        );
    }
    // The ttl=0 key goes at the next sync, taking index 31.
    let expired = store.sync(t3_zero);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].index(), 31);
}

/// etcd 3.4.23: `curl -XPUT $E/e -d value=e -d ttl=1`, then a recursive
/// stream watch on `/` printed the expiry a second later.
#[test]
fn want_etcd_expire_bytes() {
    let exp = 1_795_619_307_844_810_633; // 2026-11-25T15:08:27.844810633Z
    let mut store = Store::new();
    pad(&mut store, 20);
    let set = put(&mut store, "/e", &[("value", "e"), ("ttl", "1")], exp - SEC);
    assert_eq!(
        set.as_deref(),
        Ok(
            r#"{"action":"set","node":{"key":"/e","value":"e","expiration":"2026-11-25T15:08:27.844810633Z","ttl":1,"modifiedIndex":21,"createdIndex":21}}"#
        )
    );
    let Ok(WatchStart::Registered(w)) = store.watch("/", true, true, 0) else {
        panic!("watch not registered");
    };
    assert!(store.sync(exp - 1).is_empty(), "not due yet");
    let expired = store.sync(exp + SEC / 3);
    assert_eq!(expired.len(), 1);
    let want = r#"{"action":"expire","node":{"key":"/e","modifiedIndex":22,"createdIndex":21},"prevNode":{"key":"/e","value":"e","expiration":"2026-11-25T15:08:27.844810633Z","modifiedIndex":21,"createdIndex":21}}"#;
    assert_eq!(expired[0].to_json(), want);
    assert_eq!(expired[0].etcd_index, 22);
    let notes = store.take_notifications();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].0, w);
    assert_eq!(notes[0].1.to_json(), want);
    assert_eq!(store.stats().expire_count, 1);
    let err = store.get("/e", false, false, exp + SEC).expect_err("gone");
    assert_eq!(
        err.to_json(),
        r#"{"errorCode":100,"message":"Key not found","cause":"/e","index":22}"#
    );
}

#[test]
fn want_expiry_in_order_and_directories_taking_children() {
    let mut store = Store::new();
    let base = 1_800_000_000 * SEC;
    store
        .set(
            "/late",
            false,
            "l",
            TtlOptions::expire_at(base + 30 * SEC),
            base,
        )
        .expect("set");
    store
        .set(
            "/dir/a",
            false,
            "a",
            TtlOptions::expire_at(base + 50 * SEC),
            base,
        )
        .expect("set");
    store
        .set("/dir/b", false, "b", TtlOptions::none(), base)
        .expect("set");
    store
        .update("/dir", "", TtlOptions::expire_at(base + 10 * SEC), base)
        .expect("dir ttl");
    store
        .set(
            "/early",
            false,
            "e",
            TtlOptions::expire_at(base + 10 * SEC),
            base,
        )
        .expect("set");
    assert!(store.has_ttl_keys());
    assert_eq!(store.next_expiration(), Some(base + 10 * SEC));
    let Ok(WatchStart::Registered(child_watch)) = store.watch("/dir/b", false, false, 0) else {
        panic!("watch");
    };
    let expired = store.delete_expired_keys(base + 20 * SEC);
    let keys: Vec<(&str, u64, bool)> = expired
        .iter()
        .map(|e| (e.node.key.as_str(), e.index(), e.node.dir))
        .collect();
    // Equal expiries go in the order their TTLs were set.
    assert_eq!(keys, vec![("/dir", 6, true), ("/early", 7, false)]);
    assert!(expired.iter().all(|e| e.action == ACTION_EXPIRE));
    // The watcher of a key inside the expired directory hears of it.
    let notes = store.take_notifications();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].0, child_watch);
    assert_eq!(notes[0].1.node.key, "/dir");
    // /dir/a's own TTL went with it.
    assert_eq!(store.next_expiration(), Some(base + 30 * SEC));
    assert!(store.get("/dir/a", false, false, base).is_err());
    assert_eq!(store.delete_expired_keys(base + 100 * SEC).len(), 1);
    assert!(!store.has_ttl_keys());
}

#[test]
fn want_ttl_rounding_in_output() {
    let mut store = Store::new();
    let exp = 1_800_000_000 * SEC;
    store
        .set("/k", false, "v", TtlOptions::expire_at(exp), exp - 10 * SEC)
        .expect("set");
    let cases = [
        (exp - 10 * SEC, 10),
        (exp - 9 * SEC - 1, 10),
        (exp - 9 * SEC, 9),
        (exp - 1, 1),
        (exp, 0),
        (exp + SEC / 2, 0),
        (exp + 3 * SEC / 2, -1),
    ];
    for (now, want) in cases {
        let e = store.get("/k", false, false, now).expect("get");
        assert_eq!(e.node.ttl, want, "now {now}");
        assert_eq!(e.node.expiration, Some(exp));
    }
}

#[test]
fn want_old_expiration_means_permanent_on_create_only() {
    let mut store = Store::new();
    // Before 2000-01-01: a created key ignores it.
    let e = store
        .set("/k", false, "v", TtlOptions::expire_at(5 * SEC), 10 * SEC)
        .expect("set");
    assert_eq!(e.node.expiration, None);
    assert!(!store.has_ttl_keys());
    // An update keeps whatever it is given, and the key goes at the next sync.
    let e = store
        .update("/k", "w", TtlOptions::expire_at(5 * SEC), 10 * SEC)
        .expect("update");
    assert_eq!(e.node.expiration, Some(5 * SEC));
    assert_eq!(e.node.ttl, -5);
    assert_eq!(store.sync(10 * SEC).len(), 1);
}

#[test]
fn want_refresh_rules() {
    let mut store = Store::new();
    let now = 1_800_000_000 * SEC;
    // Refresh needs the key.
    let err = store
        .set(
            "/nope",
            false,
            "",
            TtlOptions {
                expire_at: Some(now + SEC),
                refresh: true,
            },
            now,
        )
        .expect_err("refresh of nothing");
    assert_eq!((err.code, err.cause.as_str(), err.index), (100, "/nope", 0));
    store
        .set("/k", false, "v", TtlOptions::expire_at(now + SEC), now)
        .expect("set");
    let Ok(WatchStart::Registered(_)) = store.watch("/k", false, true, 0) else {
        panic!("watch");
    };
    // The value given with a refresh is ignored; watchers are not told.
    let e = store
        .update(
            "/k",
            "other",
            TtlOptions {
                expire_at: Some(now + 9 * SEC),
                refresh: true,
            },
            now,
        )
        .expect("refresh");
    assert_eq!(e.node.value.as_deref(), Some("v"));
    assert_eq!(e.node.ttl, 9);
    assert!(e.refresh);
    assert!(!e.to_json().contains("refresh"));
    let e = store
        .compare_and_swap(
            "/k",
            "v",
            0,
            "x",
            TtlOptions {
                expire_at: Some(now + 5 * SEC),
                refresh: true,
            },
            now,
        )
        .expect("cas refresh");
    assert_eq!(e.node.value.as_deref(), Some("v"));
    assert!(store.take_notifications().is_empty());
    // Nor does a watch from the history see refreshes.
    assert!(matches!(
        store.watch("/k", false, false, 2),
        Ok(WatchStart::Registered(_))
    ));
    // Only the last expiry counts.
    assert_eq!(store.next_expiration(), Some(now + 5 * SEC));
    assert!(store.sync(now + 4 * SEC).is_empty());
    assert_eq!(store.sync(now + 5 * SEC).len(), 1);
}
