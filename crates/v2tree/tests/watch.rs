//! Watches: the history window, answers from it, and which registered
//! watchers hear of which change.

use actcd_v2tree::{Event, Store, TtlOptions, WatchStart, WatcherId};

fn set(store: &mut Store, path: &str) -> Event {
    store
        .set(path, false, "v", TtlOptions::none(), 0)
        .expect("set")
}

fn register(store: &mut Store, key: &str, recursive: bool, stream: bool) -> WatcherId {
    match store.watch(key, recursive, stream, 0) {
        Ok(WatchStart::Registered(id)) => id,
        other => panic!("watch {key}: {other:?}"),
    }
}

fn heard(store: &mut Store) -> Vec<(WatcherId, String, u64)> {
    store
        .take_notifications()
        .into_iter()
        .map(|(id, e)| (id, e.index(), e.node.key.clone()))
        .map(|(id, i, k)| (id, k, i))
        .collect()
}

#[test]
fn want_watchers_hear_their_key_and_recursive_ones_below() {
    let mut store = Store::new();
    let exact = register(&mut store, "/foo", false, false);
    let rec = register(&mut store, "/foo", true, false);
    let root = register(&mut store, "/", true, true);
    assert_eq!(store.watcher_count(), 3);
    assert_eq!(store.watcher_start_index(exact), Some(0));
    // A change below /foo: the recursive watchers only.
    set(&mut store, "/foo/bar");
    assert_eq!(
        heard(&mut store),
        vec![
            (root, "/foo/bar".to_owned(), 1),
            (rec, "/foo/bar".to_owned(), 1)
        ]
    );
    // The one-shot recursive watcher is gone; the stream one stays.
    assert_eq!(store.watcher_count(), 2);
    store.delete("/foo", true, true, 0).expect("delete");
    assert_eq!(
        heard(&mut store),
        vec![(exact, "/foo".to_owned(), 2), (root, "/foo".to_owned(), 2)]
    );
    assert_eq!(store.watcher_count(), 1);
    assert!(store.stats_json().ends_with(",\"watchers\":1}"));
    assert!(store.cancel_watch(root));
    assert!(!store.cancel_watch(root));
    assert_eq!(store.watcher_count(), 0);
}

#[test]
fn want_hidden_keys_kept_from_ancestors() {
    let mut store = Store::new();
    let root = register(&mut store, "/", true, true);
    let a = register(&mut store, "/a", true, true);
    let hidden_dir = register(&mut store, "/a/_h", true, true);
    let hidden_key = register(&mut store, "/_k", false, true);
    set(&mut store, "/_k");
    set(&mut store, "/a/_h/x");
    set(&mut store, "/a/b");
    assert_eq!(
        heard(&mut store),
        vec![
            (hidden_key, "/_k".to_owned(), 1),
            (hidden_dir, "/a/_h/x".to_owned(), 2),
            (root, "/a/b".to_owned(), 3),
            (a, "/a/b".to_owned(), 3),
        ]
    );
}

#[test]
fn want_deletes_reach_watchers_of_removed_keys() {
    let mut store = Store::new();
    set(&mut store, "/d/x/y");
    set(&mut store, "/d/_h");
    set(&mut store, "/w");
    let deep = register(&mut store, "/d/x/y", false, false);
    let hidden = register(&mut store, "/d/_h", false, false);
    let stream = register(&mut store, "/w", false, true);
    let parent = register(&mut store, "/d/x", false, false);
    store.delete("/d", false, true, 0).expect("delete dir");
    let got = heard(&mut store);
    // Every watcher at a removed path hears of the delete of /d, even
    // non-recursive ones, hidden ones included; children before parents.
    let ids: Vec<WatcherId> = got.iter().map(|(id, _, _)| *id).collect();
    assert_eq!(ids, vec![hidden, deep, parent]);
    assert!(got.iter().all(|(_, k, i)| k == "/d" && *i == 4));
    // A stream watcher on a deleted key hears of it twice (as etcd does).
    store.delete("/w", false, false, 0).expect("delete key");
    assert_eq!(
        heard(&mut store),
        vec![(stream, "/w".to_owned(), 5), (stream, "/w".to_owned(), 5)]
    );
    // Compare-and-delete too.
    set(&mut store, "/c");
    let c = register(&mut store, "/c", false, true);
    store.compare_and_delete("/c", "v", 0, 0).expect("cad");
    assert_eq!(heard(&mut store).len(), 2);
    assert!(store.cancel_watch(c));
}

#[test]
fn want_since_index_respected() {
    let mut store = Store::new();
    set(&mut store, "/k");
    // Waiting from a future index: earlier changes do not count.
    let Ok(WatchStart::Registered(w)) = store.watch("/k", false, false, 4) else {
        panic!("watch");
    };
    assert_eq!(store.watcher_start_index(w), Some(1));
    set(&mut store, "/k");
    set(&mut store, "/k");
    assert!(heard(&mut store).is_empty());
    set(&mut store, "/k");
    assert_eq!(heard(&mut store), vec![(w, "/k".to_owned(), 4)]);
    assert_eq!(store.watcher_start_index(w), None);
}

#[test]
fn want_answers_from_history() {
    let mut store = Store::new();
    set(&mut store, "/foo");
    set(&mut store, "/foobar/x");
    set(&mut store, "/a/_h");
    store.delete("/foobar", false, true, 0).expect("delete");
    set(&mut store, "/z");
    let cases: &[(&str, bool, u64, Option<u64>)] = &[
        ("/foo", false, 1, Some(1)),
        ("/foo", false, 2, None),
        // Recursive prefixes are whole components...
        ("/foo", true, 2, None),
        ("/foobar", true, 1, Some(2)),
        // ...but a deleted directory matches by plain string prefix.
        ("/foobar/x/y", false, 3, Some(4)),
        ("/foob", false, 1, None),
        ("/foobarbaz", false, 1, Some(4)),
        // The history does not hide hidden keys from recursive watches.
        ("/a", true, 1, Some(3)),
        ("/", true, 5, Some(5)),
        ("/z", false, 6, None),
    ];
    for (key, recursive, since, want) in cases {
        let got = store.watch(key, *recursive, false, *since).expect("watch");
        match (got, want) {
            (WatchStart::Ready(e), Some(i)) => {
                assert_eq!(e.index(), *i, "{key} {since}");
                assert_eq!(e.etcd_index, 5, "ready events carry the current index");
            }
            (WatchStart::Registered(id), None) => {
                assert!(store.cancel_watch(id));
            }
            (got, want) => panic!("{key} {recursive} {since}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn want_history_window_and_cleared_error() {
    let mut store = Store::new();
    for _ in 0..1001 {
        set(&mut store, "/k");
    }
    let err = store.watch("/k", false, false, 1).expect_err("cleared");
    assert_eq!(
        err.to_json(),
        r#"{"errorCode":401,"message":"The event in requested index is outdated and cleared","cause":"the requested history has been cleared [2/1]","index":1001}"#
    );
    assert_eq!(err.http_status(), 400);
    let Ok(WatchStart::Ready(e)) = store.watch("/k", false, false, 2) else {
        panic!("index 2 is still there");
    };
    assert_eq!((e.index(), e.etcd_index), (2, 1001));
}

/// etcd 3.4.23, fresh (index 3), after 1000 `curl -XPUT $E/bulk -d value=$i`:
/// `curl "$E/bulk?wait=true&waitIndex=5"` answered 400 with
/// `X-Etcd-Index: 1022` and this body.
#[test]
fn want_etcd_cleared_bytes() {
    let mut store = Store::new();
    while store.index() < 22 {
        set(&mut store, "/_pad");
    }
    for _ in 0..1000 {
        set(&mut store, "/bulk");
    }
    let err = store.watch("/bulk", false, false, 5).expect_err("cleared");
    assert_eq!((err.http_status(), err.index), (400, 1022));
    assert_eq!(
        err.to_json(),
        r#"{"errorCode":401,"message":"The event in requested index is outdated and cleared","cause":"the requested history has been cleared [23/5]","index":1022}"#
    );
}
