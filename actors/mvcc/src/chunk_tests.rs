//! RangeStream chunks merge into the unary Range answer, across views and writes.

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::RangeRequest;
use actcd_proto::etcdserverpb::RangeResponse;
use actcd_types::msg::StreamCursor;
use actcd_types::storage::MemEngine;
use actcd_types::{EtcdError, MemberIdentity};
use prost::Message;

use super::FIRST_CHUNK_KVS;
use crate::store::Store;
use crate::test_requests::{compact, delete, put};
use crate::view::ReadView;

fn store() -> Store {
    let identity = MemberIdentity {
        cluster_id: 7,
        member_id: 9,
    };
    Store::open(Arc::new(MemEngine::new()), identity).unwrap()
}

fn apply(store: &mut Store, index: &mut u64, requests: Vec<InternalRaftRequest>) {
    *index += 1;
    let (results, _) = store
        .apply_deferred(*index, 2, requests, Vec::new(), &[])
        .unwrap();
    for r in results {
        r.unwrap();
    }
}

/// Keys `k000`..: values of growing sizes, a few overwritten or deleted, and the pair `k` /
/// `k\0` (a cursor of `k` + `\0` must not skip `k\0`).
fn filled(n: usize) -> (Store, u64) {
    let mut s = store();
    let mut index = 0;
    let mut batch = vec![put(b"k", b"bare"), put(b"k\0", b"nul")];
    for i in 0..n {
        let value = vec![b'v'; i * 37 % 300];
        batch.push(put(format!("k{i:03}").as_bytes(), &value));
    }
    apply(&mut s, &mut index, batch);
    apply(
        &mut s,
        &mut index,
        vec![put(b"k003", b"again"), delete(b"k004"), put(b"zz", b"last")],
    );
    (s, index)
}

/// Chunks of `req` until the last, each from `view(i)`, checking the chunk rules.
fn stream(
    mut view: impl FnMut(usize) -> Arc<ReadView>,
    req: &RangeRequest,
    target: usize,
) -> Result<Vec<RangeResponse>, EtcdError> {
    let mut cursor = StreamCursor::default();
    let mut chunks = Vec::new();
    while !cursor.done {
        let chunk = view(chunks.len()).range_chunk(req, &mut cursor, target)?;
        chunks.push(chunk);
        assert!(chunks.len() < 100_000, "no end");
    }
    Ok(chunks)
}

fn merge(chunks: &[RangeResponse]) -> RangeResponse {
    let mut merged = RangeResponse::default();
    for c in chunks {
        merged.merge(c.encode_to_vec().as_slice()).unwrap();
    }
    merged
}

fn check_rules(chunks: &[RangeResponse], target: usize) {
    let (last, rest) = chunks.split_last().unwrap();
    assert!(last.header.is_some());
    for c in rest {
        assert!(c.header.is_none() && !c.more && c.count == 0, "{c:?}");
        assert!(!c.kvs.is_empty());
    }
    assert!(chunks[0].kvs.len() <= FIRST_CHUNK_KVS);
    for c in &chunks[1..] {
        let size = c.encoded_len();
        assert!(c.kvs.len() == 1 || size <= target + 64, "{size} > {target}");
    }
    let keys: Vec<_> = chunks
        .iter()
        .flat_map(|c| &c.kvs)
        .map(|kv| &kv.key)
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "not ascending");
}

fn request(key: &[u8], end: &[u8]) -> RangeRequest {
    RangeRequest {
        key: key.to_vec(),
        range_end: end.to_vec(),
        ..Default::default()
    }
}

#[test]
fn chunks_merge_into_the_range_answer() {
    let (mut s, _) = filled(120);
    let view = Arc::new(s.read_view());
    let shapes: [(&[u8], &[u8]); 7] = [
        (b"k", b""),
        (b"nope", b""),
        (b"k", b"l"),
        (b"k01", b"k08"),
        (b"k1", b"\0"),
        (b"\0", b"\0"),
        (b"z", b"a"),
    ];
    for (key, end) in shapes {
        for limit in [0, 1, 9, 10, 11, 50, 121, 1000] {
            for keys_only in [false, true] {
                for target in [1, 300, 2000, 1 << 20] {
                    let req = RangeRequest {
                        limit,
                        keys_only,
                        ..request(key, end)
                    };
                    let chunks = stream(|_| Arc::clone(&view), &req, target).unwrap();
                    check_rules(&chunks, target);
                    let merged = merge(&chunks);
                    assert_eq!(merged, view.range(&req).unwrap(), "{req:?} target {target}");
                }
            }
        }
    }
}

#[test]
fn more_than_ten_keys_take_several_chunks_and_a_big_value_has_its_own() {
    let (mut s, mut index) = filled(30);
    apply(&mut s, &mut index, vec![put(b"k010x", [b'b'; 5000])]);
    let view = Arc::new(s.read_view());
    let req = request(b"k", b"l");
    let roomy = stream(|_| Arc::clone(&view), &req, 1 << 20).unwrap();
    assert_eq!(roomy[0].kvs.len(), FIRST_CHUNK_KVS);
    assert_eq!(roomy.len(), 2);
    let chunks = stream(|_| Arc::clone(&view), &req, 1000).unwrap();
    assert!(chunks.len() > 2);
    let big = chunks
        .iter()
        .find(|c| c.kvs.iter().any(|kv| kv.key == b"k010x"));
    assert_eq!(big.unwrap().kvs.len(), 1);
    assert_eq!(merge(&chunks), view.range(&req).unwrap());
}

#[test]
fn writes_between_chunks_are_not_seen() {
    let (mut s, mut index) = filled(40);
    let first = Arc::new(s.read_view());
    let req = request(b"k", b"l");
    let want = first.range(&req).unwrap();
    let mut cursor = StreamCursor::default();
    let mut chunks = vec![first.range_chunk(&req, &mut cursor, 400).unwrap()];
    apply(
        &mut s,
        &mut index,
        vec![
            put(b"k020", b"new"),
            delete(b"k030"),
            put(b"k0300", b"born"),
        ],
    );
    s.commit().unwrap();
    let later = s.read_view();
    assert!(later.revision() > first.revision());
    while !cursor.done {
        chunks.push(later.range_chunk(&req, &mut cursor, 400).unwrap());
    }
    assert_eq!(merge(&chunks), want);
    // The header is the first view's revision, stamped with the member.
    let header = chunks.last().unwrap().header.unwrap();
    assert_eq!(header.revision, first.revision());
    assert_eq!((header.cluster_id, header.member_id), (7, 9));
}

#[test]
fn a_compaction_past_the_pinned_revision_ends_the_stream() {
    let (mut s, mut index) = filled(40);
    let first = s.read_view();
    let req = request(b"k", b"l");
    let mut cursor = StreamCursor::default();
    first.range_chunk(&req, &mut cursor, 400).unwrap();
    assert!(!cursor.done);
    apply(&mut s, &mut index, vec![put(b"k001", b"x")]);
    // Compacting at the pinned revision itself leaves it readable.
    apply(&mut s, &mut index, vec![compact(cursor.at)]);
    let at_mark = s.read_view();
    let mut same = cursor.clone();
    at_mark.range_chunk(&req, &mut same, 400).unwrap();
    apply(&mut s, &mut index, vec![compact(cursor.at + 1)]);
    let compacted = s.read_view();
    let before = cursor.clone();
    assert_eq!(
        compacted.range_chunk(&req, &mut cursor, 400).unwrap_err(),
        EtcdError::Compacted
    );
    assert_eq!(cursor, before, "a failed chunk leaves the cursor");
}

#[test]
fn the_first_chunk_refuses_what_range_refuses() {
    let (mut s, mut index) = filled(5);
    let view = s.read_view();
    let future = RangeRequest {
        revision: view.revision() + 1,
        ..request(b"k", b"l")
    };
    let mut cursor = StreamCursor::default();
    assert_eq!(
        view.range_chunk(&future, &mut cursor, 100).unwrap_err(),
        EtcdError::FutureRevision
    );
    apply(&mut s, &mut index, vec![compact(2)]);
    let view = s.read_view();
    let old = RangeRequest {
        revision: 1,
        ..request(b"k", b"l")
    };
    assert_eq!(
        view.range_chunk(&old, &mut cursor, 100).unwrap_err(),
        EtcdError::Compacted
    );
    // An older revision than the newest: pinned there, the header the view's.
    let at2 = RangeRequest {
        revision: 2,
        ..request(b"k", b"l")
    };
    let chunks = stream(|_| Arc::new(s.read_view()), &at2, 100).unwrap();
    assert_eq!(merge(&chunks), view.range(&at2).unwrap());
}

#[test]
fn a_chunk_picks_at_most_its_share_of_entries() {
    let mut s = store();
    let mut index = 0;
    let keys: Vec<InternalRaftRequest> = (0..super::CHUNK_ENTRIES + 500)
        .map(|i| put(format!("t{i:06}").as_bytes(), b""))
        .collect();
    apply(&mut s, &mut index, keys);
    let view = Arc::new(s.read_view());
    let req = request(b"t", b"u");
    let chunks = stream(|_| Arc::clone(&view), &req, 1 << 30).unwrap();
    let sizes: Vec<usize> = chunks.iter().map(|c| c.kvs.len()).collect();
    assert_eq!(sizes, vec![FIRST_CHUNK_KVS, super::CHUNK_ENTRIES, 490]);
    assert_eq!(merge(&chunks), view.range(&req).unwrap());
}
