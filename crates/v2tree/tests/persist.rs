//! Saving and loading the store.

use actcd_v2tree::{Store, TtlOptions, WatchStart};

const SEC: i64 = 1_000_000_000;

fn sample() -> Store {
    let mut s = Store::new();
    let now = 1_800_000_000 * SEC;
    s.set("/a/b", false, "1", TtlOptions::none(), now)
        .expect("set");
    s.set("/a/_h", false, "h", TtlOptions::none(), now)
        .expect("set");
    s.set("/t", false, "x", TtlOptions::expire_at(now + 10 * SEC), now)
        .expect("set");
    s.create("/q", false, "in-order", true, TtlOptions::none(), now)
        .expect("post");
    s.update("/a", "", TtlOptions::expire_at(now + 20 * SEC), now)
        .expect("dir ttl");
    s.set("/e", false, "", TtlOptions::none(), now)
        .expect("set");
    s.set("/d", true, "", TtlOptions::none(), now).expect("set");
    let _ = s.get("/nope", false, false, now);
    s
}

#[test]
fn want_round_trip() {
    let now = 1_800_000_000 * SEC;
    let mut s = sample();
    let bytes = s.save();
    let mut r = Store::recover(&bytes).expect("recover");
    assert_eq!(r.index(), s.index());
    assert_eq!(r.stats_json(), s.stats_json());
    assert_eq!(r.next_expiration(), s.next_expiration());
    for path in ["/", "/a", "/a/_h", "/q", "/e", "/d"] {
        assert_eq!(
            r.get(path, true, true, now).map(|e| e.to_json()),
            s.get(path, true, true, now).map(|e| e.to_json()),
            "{path}"
        );
    }
    // The history came along: the same watches answer the same.
    for since in 1..=s.index() {
        let a = s.watch("/", true, false, since).expect("watch");
        let b = r.watch("/", true, false, since).expect("watch");
        match (a, b) {
            (WatchStart::Ready(x), WatchStart::Ready(y)) => assert_eq!(x, y),
            (a, b) => panic!("since {since}: {a:?} vs {b:?}"),
        }
    }
    // Saving again gives the same bytes.
    assert_eq!(Store::recover(&r.save()).expect("again").save(), r.save());
    // The TTLs still run: /t then the directory /a with its children.
    let expired = r.sync(now + 30 * SEC);
    let keys: Vec<&str> = expired.iter().map(|e| e.node.key.as_str()).collect();
    assert_eq!(keys, ["/t", "/a"]);
    assert!(r.get("/a/b", false, false, now).is_err());
}

#[test]
fn want_restore_keeps_watchers() {
    let mut s = sample();
    let bytes = s.save();
    let Ok(WatchStart::Registered(w)) = s.watch("/a", true, true, 0) else {
        panic!("watch");
    };
    s.restore(&bytes).expect("restore");
    assert_eq!(s.watcher_count(), 1);
    s.set("/a/c", false, "v", TtlOptions::none(), 0)
        .expect("set");
    let notes = s.take_notifications();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].0, w);
    // A recovered store has none.
    assert_eq!(Store::recover(&bytes).expect("recover").watcher_count(), 0);
}

#[test]
fn want_bad_snapshots_refused() {
    let good = String::from_utf8(sample().save()).expect("utf8");
    let cases = [
        String::new(),
        "not json".to_owned(),
        good.replacen("\"version\":1", "\"version\":2", 1),
        good.replacen("\"path\":\"/\"", "\"path\":\"/zz/..\"", 1),
        good.replacen("\"path\":\"/a\",", "\"path\":\"/gone\",", 1),
    ];
    for (i, bytes) in cases.iter().enumerate() {
        let e = Store::recover(bytes.as_bytes()).expect_err("bad");
        assert_eq!(e.code, 300, "case {i}");
        assert!(
            e.cause.starts_with("v2tree snapshot:"),
            "case {i}: {}",
            e.cause
        );
    }
}
