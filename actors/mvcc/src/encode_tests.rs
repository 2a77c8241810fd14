//! The encoded unary answer against the message path: over random histories (puts with and
//! without leases, deletes, compactions, records committed or still in the write buffer) and
//! random default-order requests, keys-only and count-only ones among them, it is what
//! `View::range` answers, byte for byte.

use std::sync::Arc;

use actcd_proto::actcdpb::InternalRaftRequest;
use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::{
    CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, RangeResponse,
};
use actcd_types::msg::RangeAnswer;
use actcd_types::storage::{KvEngine, MemEngine, Table};
use actcd_types::{EtcdError, MemberIdentity, Revision};
use prost::Message;

use super::Way;
use crate::Store;
use crate::test_requests::compact;
use crate::view::ReadView;

/// xorshift64*: the same histories on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn key(&mut self) -> Vec<u8> {
        format!("k{:02}", self.below(40)).into_bytes()
    }
}

const LEASES: [i64; 2] = [7, 8];

fn request(rng: &mut Rng, rev: i64) -> InternalRaftRequest {
    match rng.below(10) {
        0..=5 => {
            let value = vec![b'v'; rng.below(300) as usize];
            InternalRaftRequest {
                put: Some(PutRequest {
                    key: rng.key(),
                    value,
                    lease: [0, 0, LEASES[0], LEASES[1]][rng.below(4) as usize],
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        6..=8 => {
            let key = rng.key();
            let range_end = match rng.below(3) {
                0 => Vec::new(),
                1 => rng.key(),
                _ => vec![0],
            };
            InternalRaftRequest {
                delete_range: Some(DeleteRangeRequest {
                    key,
                    range_end,
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        _ => InternalRaftRequest {
            compaction: Some(CompactionRequest {
                revision: 1 + rng.below(rev.max(1) as u64) as i64,
                physical: true,
            }),
            ..Default::default()
        },
    }
}

fn range_request(rng: &mut Rng, rev: i64) -> RangeRequest {
    let (key, range_end) = match rng.below(5) {
        0 => (rng.key(), Vec::new()),
        1 => (rng.key(), rng.key()),
        2 => (rng.key(), vec![0]),
        3 => (vec![0], vec![0]),
        _ => (b"k".to_vec(), b"l".to_vec()),
    };
    let (sort_order, sort_target) = match rng.below(6) {
        0 => (SortOrder::Ascend, SortTarget::Key),
        1 => (SortOrder::None, SortTarget::Mod),
        2 => (SortOrder::Descend, SortTarget::Key),
        _ => (SortOrder::None, SortTarget::Key),
    };
    RangeRequest {
        key,
        range_end,
        limit: [0, 0, 1, 2, 5, 100][rng.below(6) as usize],
        revision: match rng.below(3) {
            0 => 1 + rng.below(rev as u64 + 1) as i64,
            _ => 0,
        },
        sort_order: sort_order as i32,
        sort_target: sort_target as i32,
        keys_only: rng.below(5) == 0,
        count_only: rng.below(10) == 0,
        min_mod_revision: if rng.below(10) == 0 { 3 } else { 0 },
        ..Default::default()
    }
}

/// The answer's bytes as the front would send them.
fn wire(answer: RangeAnswer) -> Vec<u8> {
    match answer {
        RangeAnswer::Decoded(resp) => resp.encode_to_vec(),
        RangeAnswer::Encoded(e) => {
            let mut out = Vec::new();
            e.write(&mut out).unwrap();
            assert_eq!(out.len(), e.encoded_len(), "encoded_len is exact");
            out
        }
    }
}

/// Every way of encoding (records copied when read; when written from where the transaction
/// lent them; when written after looking them up again) against `View::range`.
fn same(view: &ReadView, req: &RangeRequest) {
    let ways = [(usize::MAX, true), (0, true), (0, false)].map(|(copy_below, keep_lent)| Way {
        copy_below,
        keep_lent,
    });
    for way in ways {
        let want = view.range(req);
        let got = view.range_answer_with(req, way);
        match (want, got) {
            (Ok(want), Ok(got)) => {
                let encoded = matches!(got, RangeAnswer::Encoded(_));
                assert_eq!(encoded, super::encodable(req), "{req:?}");
                let bytes = wire(got);
                assert_eq!(RangeResponse::decode(&bytes[..]).unwrap(), want, "{req:?}");
                assert_eq!(bytes, want.encode_to_vec(), "{req:?}");
            }
            (want, got) => assert_eq!(want.err(), got.err(), "{req:?}"),
        }
    }
}

#[test]
fn the_encoded_answer_is_the_message_paths_answer() {
    let mut encoded = 0;
    let mut keys_only = 0;
    let mut count_only = 0;
    let mut leases_read = 0;
    for seed in 1..=30u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
        let mut index = 0;
        for _ in 0..40 {
            index += 1;
            let n = 1 + rng.below(6) as usize;
            let rev = store.current_revision();
            let batch = (0..n).map(|_| request(&mut rng, rev)).collect();
            // Refusals (a compaction of a compacted revision, say) are answers too.
            let _ = store.apply_deferred(index, 2, batch, Vec::new(), &LEASES);
            if rng.below(3) == 0 {
                store.commit().unwrap();
            }
            let view = store.read_view();
            for _ in 0..8 {
                let req = range_request(&mut rng, view.revision());
                encoded += usize::from(super::encodable(&req));
                if super::encodable(&req) {
                    keys_only += usize::from(req.keys_only && !req.count_only);
                    count_only += usize::from(req.count_only);
                    if req.keys_only && !req.count_only {
                        leases_read += leases_from_records(&view, &req);
                    }
                }
                same(&view, &req);
            }
        }
    }
    assert!(
        encoded > 1000,
        "only {encoded} requests took the encoded path"
    );
    assert!(
        keys_only > 200 && count_only > 200,
        "only {keys_only} keys-only and {count_only} count-only requests were encoded"
    );
    assert!(
        leases_read > 100,
        "only {leases_read} keys-only entries had their lease read from a record"
    );
}

/// How many of the keys-only answer's entries are rewritten after the read's revision with a
/// lease (their lease comes from their record, not the index).
fn leases_from_records(view: &ReadView, req: &RangeRequest) -> usize {
    let Ok(at_req) = view.range(req) else {
        return 0;
    };
    let latest = view
        .range(&RangeRequest {
            revision: 0,
            ..req.clone()
        })
        .unwrap();
    at_req
        .kvs
        .iter()
        .filter(|kv| {
            kv.lease != 0
                && latest
                    .kvs
                    .iter()
                    .find(|l| l.key == kv.key)
                    .is_none_or(|l| l.mod_revision != kv.mod_revision)
        })
        .count()
}

#[test]
fn more_keys_than_a_slice_are_read_in_order_with_limits_and_counts() {
    let mut store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
    let n = super::SLICE * 2 + 10;
    let puts = (0..n)
        .map(|i| InternalRaftRequest {
            put: Some(PutRequest {
                key: format!("key{i:06}").into_bytes(),
                value: vec![b'x'; i % 50],
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    store.apply_deferred(1, 2, puts, Vec::new(), &[]).unwrap();
    store.commit().unwrap();
    let view = store.read_view();
    for limit in [
        0,
        1,
        super::SLICE as i64,
        super::SLICE as i64 + 1,
        n as i64 - 1,
    ] {
        for (key, range_end) in [(&b"key"[..], &b"kez"[..]), (b"key000100", &[0][..])] {
            for keys_only in [false, true] {
                same(
                    &view,
                    &RangeRequest {
                        key: key.to_vec(),
                        range_end: range_end.to_vec(),
                        limit,
                        keys_only,
                        ..Default::default()
                    },
                );
            }
        }
    }
}

#[test]
fn a_damaged_record_answers_corrupt_and_a_missing_one_compacted() {
    let engine = Arc::new(MemEngine::new());
    let mut store = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let puts = ["a", "b", "c"]
        .iter()
        .map(|k| InternalRaftRequest {
            put: Some(PutRequest {
                key: k.as_bytes().to_vec(),
                value: b"value".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    store.apply_deferred(1, 2, puts, Vec::new(), &[]).unwrap();
    store.commit().unwrap();
    let all = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        ..Default::default()
    };
    let view = store.read_view();
    assert!(matches!(
        view.range_answer(&all),
        Ok(RangeAnswer::Encoded(_))
    ));
    // Checked and copied now: a record damaged afterwards is not read again.
    let early = view.range_answer(&all).unwrap();

    let at = Revision::new(3, 0).to_bytes(false);
    let mut w = engine.write().unwrap();
    let mut stored = w.get(Table::Key, &at).unwrap().unwrap();
    *stored.last_mut().unwrap() ^= 1;
    w.put(Table::Key, &at, &stored).unwrap();
    w.commit().unwrap();
    assert_eq!(view.range_answer(&all).unwrap_err(), EtcdError::Corrupt);
    assert_eq!(
        view.range_answer_with(
            &all,
            Way {
                copy_below: 0,
                keep_lent: false
            }
        )
        .unwrap_err(),
        EtcdError::Corrupt
    );
    assert_eq!(
        RangeResponse::decode(&wire(early)[..]).unwrap().kvs.len(),
        3
    );

    // Gone from under the view (a compaction accepted after it): compacted, not corrupt.
    let mut w = engine.write().unwrap();
    w.delete(Table::Key, &at).unwrap();
    w.commit().unwrap();
    assert_eq!(view.range_answer(&all).unwrap_err(), EtcdError::Compacted);
}

#[test]
fn only_a_large_answer_keeps_its_read_transaction() {
    let mut store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
    let big = super::COPY_BELOW / 4;
    let puts = (0..5)
        .map(|i| InternalRaftRequest {
            put: Some(PutRequest {
                key: format!("k{i}").into_bytes(),
                value: vec![b'v'; big],
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect();
    store.apply_deferred(1, 2, puts, Vec::new(), &[]).unwrap();
    let view = store.read_view();
    let lazy = |limit: i64| {
        let req = RangeRequest {
            key: b"k".to_vec(),
            range_end: b"l".to_vec(),
            limit,
            ..Default::default()
        };
        let src = view.encode_source(Way::SERVED);
        super::unary(&src, &req).unwrap().is_lazy()
    };
    assert!(!lazy(3), "three quarters of the limit: copied");
    assert!(lazy(4), "at the limit: written from the transaction");
    assert!(lazy(0));
}

fn put(key: String, lease: i64) -> InternalRaftRequest {
    InternalRaftRequest {
        put: Some(PutRequest {
            key: key.into_bytes(),
            value: b"value".to_vec(),
            lease,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A large keys-only answer is encoded from a second walk of the index when it is written:
/// what the writer did meanwhile (rewrites with other leases, deletes, new keys, a compaction
/// up to the read's revision) does not show, and a compaction past it refuses the answer
/// rather than send another.
#[test]
fn a_keys_only_answer_written_later_is_the_one_read() {
    let mut store = Store::open(Arc::new(MemEngine::new()), MemberIdentity::default()).unwrap();
    let key = |i: usize| format!("k{i:05}");
    let n = super::SLICE + 100;
    let puts = (0..n).map(|i| put(key(i), LEASES[i % 2])).collect();
    store
        .apply_deferred(1, 2, puts, Vec::new(), &LEASES)
        .unwrap();
    let first = store.current_revision();
    // Half the keys rewritten, so the old revision's leases are only in their records.
    let rewrites = (0..n).step_by(2).map(|i| put(key(i), LEASES[1])).collect();
    store
        .apply_deferred(2, 2, rewrites, Vec::new(), &LEASES)
        .unwrap();
    store.commit().unwrap();
    let view = store.read_view();
    let lazy = Way {
        copy_below: 0,
        keep_lent: true,
    };
    let all = |revision: i64| RangeRequest {
        key: b"k".to_vec(),
        range_end: b"l".to_vec(),
        revision,
        keys_only: true,
        ..Default::default()
    };
    let mut answers = Vec::new();
    for req in [
        all(0),
        all(first),
        RangeRequest {
            limit: 10,
            ..all(first)
        },
    ] {
        let want = view.range(&req).unwrap();
        // At the first revision, half the leases are read from the records.
        let from_records = want.kvs.iter().filter(|kv| kv.lease == LEASES[0]).count();
        assert_eq!(from_records > 0, req.revision == first, "{req:?}");
        let RangeAnswer::Encoded(answer) = view.range_answer_with(&req, lazy).unwrap() else {
            panic!("keys-only is encoded");
        };
        answers.push((answer, want));
    }

    // The writer goes on: other leases, deletes, new keys, a compaction at the first revision.
    let rev = store.current_revision();
    let mut later: Vec<_> = (0..n).step_by(3).map(|i| put(key(i), 0)).collect();
    later.push(InternalRaftRequest {
        delete_range: Some(DeleteRangeRequest {
            key: key(10).into_bytes(),
            range_end: key(200).into_bytes(),
            ..Default::default()
        }),
        ..Default::default()
    });
    later.extend((n..n + 50).map(|i| put(key(i), LEASES[0])));
    store
        .apply_deferred(3, 2, later, Vec::new(), &LEASES)
        .unwrap();
    store
        .apply_deferred(4, 2, vec![compact(first)], Vec::new(), &LEASES)
        .unwrap();
    store.finish_compaction_now().unwrap();
    store.commit().unwrap();
    assert!(store.current_revision() > rev);
    for (answer, want) in &answers {
        let mut bytes = Vec::new();
        answer.write(&mut bytes).unwrap();
        assert_eq!(bytes.len(), answer.encoded_len());
        assert_eq!(bytes, want.encode_to_vec());
    }

    // A compaction past the read's revision: its entries are gone from the index.
    store
        .apply_deferred(5, 2, vec![compact(rev)], Vec::new(), &LEASES)
        .unwrap();
    store.finish_compaction_now().unwrap();
    store.commit().unwrap();
    let mut out = Vec::new();
    assert_eq!(
        answers[1].0.write(&mut out).unwrap_err(),
        EtcdError::Compacted
    );
}
