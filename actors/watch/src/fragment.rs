//! Splitting one large watch response into fragments, as etcd's `sendFragments` does.
//!
//! Only for watchers created with `fragment: true`. A response whose encoded size is under the
//! limit, or that holds a single event, goes out whole. Otherwise events are packed in order into
//! responses that each stay under the limit (a response always takes at least one event, however
//! large); every piece but the last carries `fragment: true`. The client glues pieces back
//! together until it sees `fragment: false`, so the pieces must reach the stream back to back.
//!
//! Sizes are measured exactly as protobuf encodes them, incrementally (etcd re-measures the
//! whole response after each event).

use actcd_proto::etcdserverpb::WatchResponse;
use prost::Message;
use prost::encoding::{encoded_len_varint, key_len};

/// etcd lets a watch response be this much larger than `--max-request-bytes` (its
/// `grpcOverheadBytes`).
pub const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// `WatchResponse.events` is field 11.
const EVENTS_TAG: u32 = 11;

/// Split `resp` into pieces of fewer than `limit` encoded bytes each (see the module doc).
pub fn fragment(resp: WatchResponse, limit: usize) -> Vec<WatchResponse> {
    if resp.events.len() < 2 || resp.encoded_len() < limit {
        return vec![resp];
    }
    let mut base = resp.clone();
    base.events = Vec::new();
    base.fragment = true;
    let base_len = base.encoded_len();

    let mut out = Vec::new();
    let mut cur = base.clone();
    let mut cur_len = base_len;
    for ev in resp.events {
        let len = ev.encoded_len();
        let ev_len = key_len(EVENTS_TAG) + encoded_len_varint(len as u64) + len;
        if !cur.events.is_empty() && cur_len + ev_len >= limit {
            out.push(std::mem::replace(&mut cur, base.clone()));
            cur_len = base_len;
        }
        cur.events.push(ev);
        cur_len += ev_len;
    }
    cur.fragment = false;
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use actcd_proto::etcdserverpb::ResponseHeader;
    use actcd_proto::mvccpb::{Event, KeyValue};

    use super::*;

    fn ev(i: usize, value_len: usize) -> Event {
        Event {
            r#type: 0,
            kv: Some(KeyValue {
                key: format!("k{i:03}").into_bytes(),
                value: vec![b'v'; value_len],
                mod_revision: 10 + i as i64,
                create_revision: 10 + i as i64,
                version: 1,
                lease: 0,
            }),
            prev_kv: None,
        }
    }

    fn resp(events: Vec<Event>) -> WatchResponse {
        WatchResponse {
            header: Some(ResponseHeader {
                cluster_id: 14841639068965178418,
                member_id: 10276657743932975437,
                revision: 42,
                raft_term: 2,
            }),
            watch_id: 7,
            events,
            ..Default::default()
        }
    }

    /// The reference: etcd's loop, re-measuring the whole piece after each event.
    fn etcd_split(wr: WatchResponse, max: usize) -> Vec<WatchResponse> {
        if wr.encoded_len() < max || wr.events.len() < 2 {
            return vec![wr];
        }
        let mut ow = wr.clone();
        ow.events.clear();
        ow.fragment = true;
        let mut out = Vec::new();
        let mut idx = 0;
        loop {
            let mut cur = ow.clone();
            for ev in &wr.events[idx..] {
                cur.events.push(ev.clone());
                if cur.events.len() > 1 && cur.encoded_len() >= max {
                    cur.events.pop();
                    break;
                }
                idx += 1;
            }
            if idx == wr.events.len() {
                cur.fragment = false;
            }
            let last = !cur.fragment;
            out.push(cur);
            if last {
                return out;
            }
        }
    }

    #[test]
    fn splits_like_etcd() {
        struct Case {
            name: &'static str,
            events: Vec<Event>,
            limit: usize,
            want_pieces: usize,
        }
        let cases = [
            Case {
                name: "small response goes whole",
                events: (0..5).map(|i| ev(i, 10)).collect(),
                limit: 10_000,
                want_pieces: 1,
            },
            Case {
                name: "one huge event goes whole",
                events: vec![ev(0, 50_000)],
                limit: 1000,
                want_pieces: 1,
            },
            Case {
                name: "ten 300-byte events under 1000 bytes",
                events: (0..10).map(|i| ev(i, 300)).collect(),
                limit: 1000,
                want_pieces: 4,
            },
            Case {
                name: "events larger than the limit go one per piece",
                events: (0..4).map(|i| ev(i, 2000)).collect(),
                limit: 1000,
                want_pieces: 4,
            },
            Case {
                name: "mixed sizes",
                events: (0..40).map(|i| ev(i, (i * 37) % 500)).collect(),
                limit: 1500,
                want_pieces: 9,
            },
        ];
        for c in cases {
            let r = resp(c.events);
            let got = fragment(r.clone(), c.limit);
            let want = etcd_split(r.clone(), c.limit);
            assert_eq!(got, want, "{}", c.name);
            assert_eq!(got.len(), c.want_pieces, "{}", c.name);
            let last = got.len() - 1;
            for (i, piece) in got.iter().enumerate() {
                assert_eq!(piece.fragment, i != last, "{}: piece {i}", c.name);
                assert!(piece.events.len() == 1 || piece.encoded_len() < c.limit);
                assert_eq!(piece.header, r.header);
                assert_eq!(piece.watch_id, r.watch_id);
            }
            let rejoined: Vec<Event> = got.into_iter().flat_map(|p| p.events).collect();
            assert_eq!(rejoined, r.events, "{}", c.name);
        }
    }
}
