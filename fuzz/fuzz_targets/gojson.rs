//! Fuzz target `gojson`: a JSON gateway body decoded as `actcd_gojson` decodes it for the
//! gateway (`actors/front/src/http/gateway.rs`). The first byte picks the request message
//! (Put, Range, Txn, Watch, Authenticate, …);
//! the rest is the body: its first value as a unary call reads it, then every value as a
//! bidirectional call (`/v3/watch`, `/v3/lease/keepalive`) reads them, each decoded into the
//! message and the message encoded and decoded again as the gateway hands it to the service.
#![no_main]

use std::sync::LazyLock;

use actcd_gojson::{Decoder, decode_message};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

/// The gateway's request messages; a seed's first byte is its index here.
const NAMES: &[&str] = &[
    "etcdserverpb.PutRequest",
    "etcdserverpb.RangeRequest",
    "etcdserverpb.TxnRequest",
    "etcdserverpb.WatchRequest",
    "etcdserverpb.AuthenticateRequest",
    "etcdserverpb.DeleteRangeRequest",
    "etcdserverpb.LeaseKeepAliveRequest",
    "etcdserverpb.LeaseGrantRequest",
    "etcdserverpb.CompactionRequest",
    "etcdserverpb.AuthRoleGrantPermissionRequest",
    "etcdserverpb.MemberAddRequest",
    "etcdserverpb.AlarmRequest",
    "v3lockpb.LockRequest",
    "v3electionpb.CampaignRequest",
    "etcdserverpb.LeaseTimeToLiveRequest",
    "etcdserverpb.AuthUserAddRequest",
];

static MESSAGES: LazyLock<Vec<MessageDescriptor>> = LazyLock::new(|| {
    let pool = DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET).expect("descriptors");
    NAMES
        .iter()
        .map(|n| pool.get_message_by_name(n).expect(n))
        .collect()
});

/// What the gateway does with one value: decode it into the message, then hand the service
/// the message prost decodes from its encoding.
fn as_request(desc: &MessageDescriptor, value: &[u8]) {
    let Ok(dynamic) = decode_message(desc, value) else {
        return;
    };
    let encoded = dynamic.encode_to_vec();
    let _ = match desc.full_name() {
        "etcdserverpb.PutRequest" => {
            actcd_proto::etcdserverpb::PutRequest::decode(encoded.as_slice()).map(drop)
        }
        "etcdserverpb.RangeRequest" => {
            actcd_proto::etcdserverpb::RangeRequest::decode(encoded.as_slice()).map(drop)
        }
        "etcdserverpb.TxnRequest" => {
            actcd_proto::etcdserverpb::TxnRequest::decode(encoded.as_slice()).map(drop)
        }
        "etcdserverpb.WatchRequest" => {
            actcd_proto::etcdserverpb::WatchRequest::decode(encoded.as_slice()).map(drop)
        }
        _ => DynamicMessage::decode(desc.clone(), encoded.as_slice()).map(drop),
    };
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let desc = &MESSAGES[usize::from(pick) % MESSAGES.len()];
    // A unary call: the first value, an empty body as `null`.
    match Decoder::new(body).next_value() {
        Ok(value) => as_request(desc, value.unwrap_or(b"null")),
        Err(_) => return,
    }
    // A bidirectional call: value after value until the end or an error. Each value takes at
    // least one byte, so this ends within `body.len()` rounds; more is a hang.
    let mut decoder = Decoder::new(body);
    for _ in 0..=body.len() {
        match decoder.next_value() {
            Ok(Some(value)) => as_request(desc, value),
            Ok(None) | Err(_) => return,
        }
    }
    panic!("the decoder handed out more values than the body has bytes");
});
