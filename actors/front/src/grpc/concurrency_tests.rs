//! Tests of the front's `concurrency.rs` (its `tests` module, included from there by `#[path]`).

use super::*;

#[test]
fn prefixes_and_keys_are_etcds() {
    assert_eq!(prefix_end(b"lock/"), b"lock0");
    assert_eq!(prefix_end(b"a\xff"), b"b");
    assert_eq!(prefix_end(b"\xff\xff"), [0]);
    assert_eq!(prefix_of(b"job"), b"job/");
    assert_eq!(
        candidate_key(b"job/", 0x694d7a1f25e8cc0b),
        b"job/694d7a1f25e8cc0b"
    );
}

#[test]
fn a_guard_cleans_up_unless_disarmed() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = Arc::new(AtomicUsize::new(0));
    let count = || {
        let n = n.clone();
        move || {
            n.fetch_add(1, Ordering::SeqCst);
        }
    };
    drop(CleanupGuard::new(count()));
    CleanupGuard::new(count()).disarm();
    assert_eq!(n.load(Ordering::SeqCst), 1);
}
