//! Heap bytes the key index takes per key: builds a [`TreeIndex`] of Kubernetes-like pod keys
//! (`/registry/pods/ns-NNNN/pod-NNNNNN`, as `actcd-bench --key-format k8s` writes them) the two
//! ways the server does, by puts (the load) and by inserting restored key indexes (recovery
//! after a restart), and prints the bytes and allocations that are live afterwards, per key.
//!
//! Run: `cargo run --release -p actcd-mvcc --example index_memory [KEYS]` (default 1,000,000).
//! The bytes are the ones requested from the allocator; mimalloc (the server's) rounds each
//! allocation up to its size class, so the server's share is a little larger.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use actcd_mvcc::{KeyIndex, TreeIndex};
use actcd_types::Revision;

struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to `System` unchanged; only counts. (A global allocator is an unsafe
// impl by nature; this one is only in this example.)
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn key(i: u64) -> Vec<u8> {
    format!("/registry/pods/ns-{:04}/pod-{:06}", i / 1000, i).into_bytes()
}

fn report(how: &str, keys: u64, before: (isize, isize)) {
    let bytes = BYTES.load(Ordering::Relaxed) - before.0;
    let allocs = ALLOCS.load(Ordering::Relaxed) - before.1;
    println!(
        "{how}: {keys} keys, {:.1} MiB, {:.1} bytes and {:.2} allocations per key",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / keys as f64,
        allocs as f64 / keys as f64
    );
}

fn now() -> (isize, isize) {
    (
        BYTES.load(Ordering::Relaxed),
        ALLOCS.load(Ordering::Relaxed),
    )
}

fn main() {
    let keys: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("KEYS: a number"));

    let before = now();
    let mut index = TreeIndex::new();
    for i in 0..keys {
        index.put(&key(i), Revision::new(i as i64 + 2, 0));
    }
    report("put once", keys, before);
    drop(index);

    let before = now();
    let mut index = TreeIndex::new();
    for i in 0..keys {
        let rev = Revision::new(i as i64 + 2, 0);
        index.insert(key(i), KeyIndex::restore(rev, rev, 1));
    }
    report("restored", keys, before);
    drop(index);
}
