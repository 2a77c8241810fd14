//! Tests of the front's `watch_route.rs` (its `tests` module, included from there by `#[path]`).

use actcd_proto::etcdserverpb::ResponseHeader;
use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::watch::{EventRun, SharedEvents};

use super::*;

fn put(key: &str, rev: i64, prev: bool) -> Event {
    let kv = |rev| KeyValue {
        key: key.as_bytes().to_vec(),
        create_revision: 1,
        mod_revision: rev,
        version: rev,
        value: vec![b'v'; rev as usize * 7],
        lease: 0,
    };
    Event {
        r#type: EventType::Put as i32,
        kv: Some(kv(rev)),
        prev_kv: prev.then(|| kv(rev - 1)),
    }
}

/// Whatever part of a response's events is shared, it is written byte for byte as prost
/// writes the whole message, and decodes to it.
#[test]
fn shared_events_are_written_as_prost_writes_the_message() {
    let all = Arc::new(EventRun::new(
        (2..7).map(|r| put("a/b", r, r % 2 == 0)).collect(),
    ));
    let base = WatchResponse {
        header: Some(ResponseHeader {
            cluster_id: 7,
            member_id: 8,
            revision: 6,
            raft_term: 2,
        }),
        watch_id: 3,
        fragment: true,
        ..Default::default()
    };
    for (own, start, end) in [(0, 0, 5), (0, 2, 5), (0, 5, 5), (2, 0, 0), (1, 1, 4)] {
        let mut response = base.clone();
        response.events = all[..own].to_vec();
        let out = WatchOut {
            response,
            shared: Some(SharedEvents {
                all: Arc::clone(&all),
                start,
                end,
            }),
        };
        let whole = WatchResponse::from(WatchOut {
            response: out.response.clone(),
            shared: out.shared.clone(),
        });
        let mut got = Vec::new();
        encode(&out, &mut got).expect("room");
        assert_eq!(
            got,
            whole.encode_to_vec(),
            "own {own}, shared {start}..{end}"
        );
        assert_eq!(WatchResponse::decode(&got[..]).expect("decodes"), whole);
    }
    let alone = WatchOut::from(base.clone());
    let mut got = Vec::new();
    encode(&alone, &mut got).expect("room");
    assert_eq!(got, base.encode_to_vec());
}
