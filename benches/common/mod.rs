//! Set-up shared by the per-actor benches: criterion settings sized for a 2-core machine shared
//! with a build, the request shapes every bench writes (a Put of a 256-byte value), and an MVCC
//! store over LMDB in a temporary directory on the data disk (`/tmp` is ext4 here, so fsyncs are
//! real), and the process's resident memory for benches that report memory per item.

// Each bench binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actcd_backend::{BackendOptions, LmdbEngine};
use actcd_mvcc::Store;
use actcd_proto::actcdpb::{InternalRaftRequest, RequestHeader};
use actcd_proto::etcdserverpb::PutRequest;
use actcd_types::MemberIdentity;
use actcd_types::msg::ApplyResult;
use criterion::Criterion;

/// Value size of every write (etcd's benchmark tool defaults to 8 bytes; 256 is closer to what
/// Kubernetes-sized objects look like after the key).
pub const VALUE_LEN: usize = 256;

/// Short runs: 10 samples, 1 s warm-up, 2.5 s measurement. Enough to compare two builds on an
/// idle machine; not a substitute for a long run before publishing numbers.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_millis(2500))
}

/// `key/00000042`: fixed width, so keys sort in numeric order and `[key(a), key(b))` holds
/// exactly `b - a` keys.
pub fn key(i: u64) -> Vec<u8> {
    format!("key/{i:08}").into_bytes()
}

/// A proposed Put of `key(i)` carrying request id `id`.
pub fn put(id: u64, i: u64) -> InternalRaftRequest {
    InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            ..Default::default()
        }),
        put: Some(PutRequest {
            key: key(i),
            value: vec![b'v'; VALUE_LEN],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The LMDB engine as the daemon opens it (default options: 8 GiB map, one `fdatasync` per
/// commit).
pub fn lmdb(dir: &Path) -> Arc<LmdbEngine> {
    Arc::new(LmdbEngine::open(dir, BackendOptions::default()).expect("open LMDB"))
}

/// An MVCC store over LMDB in `dir` holding keys `0..keys`, one Put (one revision) each, written
/// in batches of 1000 as the applier would (one consistent index per batch).
pub fn preloaded_store(dir: &Path, keys: u64) -> Store {
    let mut store = Store::open(lmdb(dir), MemberIdentity::default()).expect("open store");
    let mut index = store.consistent_index();
    for first in (0..keys).step_by(1000) {
        index += 1;
        let requests = (first..keys.min(first + 1000)).map(|i| put(i, i)).collect();
        let results = store.apply_batch(index, 1, requests);
        check_all(results.expect("preload batch"));
    }
    store
}

/// Panics unless every request of a batch succeeded; returns the revision of the last one.
pub fn check_all(results: Vec<ApplyResult>) -> i64 {
    let mut revision = 0;
    for r in results {
        let resp = r.expect("request refused");
        revision = resp.header().map_or(revision, |h| h.revision);
    }
    revision
}

/// The process's resident set size (`VmRSS` in `/proc/self/status`), in bytes. Pages, not
/// allocations: compare two readings around something large (tens of MB) and divide.
pub fn vm_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}
