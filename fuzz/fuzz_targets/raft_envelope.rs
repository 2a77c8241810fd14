//! Fuzz target `raft_envelope`: what the peer transport (`actors/transport`) decodes from a
//! peer: a `RaftMessage` frame whose `data` the raft node decodes as raft's `Message`
//! (`RaftNode::decode_peer_message`, as `step` does), a snapshot's `SnapshotChunk` whose
//! `raft_message` gives the snapshot index, and the `MembersReply` a joining member reads.
//! The first byte picks which; the rest is the gRPC message body.
#![no_main]

use actcd_proto::actcdpb::{MembersReply, RaftMessage, SnapshotChunk};
use actcd_raft::RaftNode;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    match pick % 4 {
        0 => {
            if let Ok(m) = RaftMessage::decode(body) {
                let _ = RaftNode::decode_peer_message(&m.data);
            }
        }
        1 => {
            if let Ok(c) = SnapshotChunk::decode(body) {
                let _ = RaftNode::snapshot_index(&c.raft_message);
            }
        }
        2 => {
            let _ = MembersReply::decode(body);
        }
        _ => {
            // The raft payload alone, without the envelope around it.
            let _ = RaftNode::decode_peer_message(body);
        }
    }
});
