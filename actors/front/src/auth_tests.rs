//! Tests of the front's `auth.rs` (its `tests` module, included from there by `#[path]`).

use actcd_proto::etcdserverpb::{AuthUserListResponse, ResponseHeader};
use prost::Message;

#[test]
fn names_that_are_not_utf8_are_replaced_as_go_writes_them() {
    let pool = prost_reflect::DescriptorPool::decode(actcd_proto::FILE_DESCRIPTOR_SET).unwrap();
    let desc = pool
        .get_message_by_name("etcdserverpb.AuthUserListResponse")
        .unwrap();
    let msg = AuthUserListResponse {
        header: Some(ResponseHeader {
            cluster_id: 7,
            revision: 3,
            ..Default::default()
        }),
        users: vec![
            b"root".to_vec(),
            b"u\xff\xfe".to_vec(),
            b"a\xe2\x82b".to_vec(),
        ],
    };
    let encoded = msg.encode_to_vec();
    assert!(
        prost_reflect::DynamicMessage::decode(desc.clone(), encoded.as_slice()).is_err(),
        "the JSON descriptors say string"
    );
    let fixed = super::go_lossy_strings(&desc, &encoded).unwrap();
    let back = AuthUserListResponse::decode(fixed.as_slice()).unwrap();
    assert_eq!(back.header, msg.header, "other fields as they were");
    assert_eq!(
        back.users,
        [
            b"root".to_vec(),
            "u\u{FFFD}\u{FFFD}".as_bytes().to_vec(),
            "a\u{FFFD}\u{FFFD}b".as_bytes().to_vec()
        ]
    );
    assert!(prost_reflect::DynamicMessage::decode(desc.clone(), fixed.as_slice()).is_ok());
    assert_eq!(
        super::go_lossy_strings(&desc, &[0x0a, 0x05, 0x01]),
        None,
        "cut short"
    );
}
