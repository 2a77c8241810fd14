//! Tests of `gateway.rs` (its `tests` module, included from there by `#[path]`), against etcd's
//! own messages and the answers etcd 3.5.1's gateway gave.

use actcd_proto::etcdserverpb::{
    AuthUserListResponse, PutRequest, RangeResponse, ResponseHeader, WatchRequest,
};
use actcd_proto::mvccpb::KeyValue;
use prost::Message;

use super::*;

fn etcd() -> Messages {
    Messages::decode(actcd_proto::FILE_DESCRIPTOR_SET, "etcdserverpb")
}

#[test]
fn json_is_etcds_gateway_json() {
    let resp = RangeResponse {
        header: Some(ResponseHeader {
            cluster_id: 14841639068965178418,
            member_id: 10276657743932975437,
            revision: 2,
            raft_term: 2,
        }),
        kvs: vec![KeyValue {
            key: b"foo".to_vec(),
            create_revision: 2,
            mod_revision: 2,
            version: 1,
            value: b"bar".to_vec(),
            lease: 0,
        }],
        more: false,
        count: 1,
    };
    let m = etcd();
    assert_eq!(
        m.to_json(&resp, "RangeResponse").unwrap(),
        r#"{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}"#
    );
    // Requests take proto names, JSON names and strings or numbers for 64-bit fields.
    let put: PutRequest = m
        .from_json(
            br#"{"key":"Zm9v","value":"YmFy","prev_kv":true,"lease":"7"}"#,
            "PutRequest",
        )
        .unwrap();
    assert_eq!(
        (put.key.as_slice(), put.prev_kv, put.lease),
        (&b"foo"[..], true, 7)
    );
    let put: PutRequest = m
        .from_json(br#"{"key":"Zm9v","prevKv":true}"#, "PutRequest")
        .unwrap();
    assert!(put.prev_kv);
    let refused = m.from_json::<PutRequest>(b"{not json", "PutRequest");
    assert_eq!(
        refused.map_err(|s| s.code()),
        Err(tonic::Code::InvalidArgument)
    );
    // An empty body is an empty request; full names reach other packages.
    assert_eq!(
        m.from_json::<PutRequest>(b"", "PutRequest").unwrap(),
        PutRequest::default()
    );
    assert!(m.descriptor("mvccpb.KeyValue").is_ok());
    assert_eq!(
        m.descriptor("NoSuchMessage").unwrap_err().message(),
        "no descriptor for NoSuchMessage"
    );
    let none = Messages::decode(b"\xff", "etcdserverpb");
    assert_eq!(
        none.descriptor("PutRequest").unwrap_err().message(),
        "descriptors unavailable"
    );
}

#[test]
fn errors_carry_grpc_gateways_status() {
    let (status, body) = error_answer(&Status::invalid_argument("etcdserver: key is not provided"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        r#"{"error":"etcdserver: key is not provided","code":3,"message":"etcdserver: key is not provided"}"#
    );
    assert_eq!(
        http_status(tonic::Code::Unauthenticated),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        stream_error(&Status::unknown("auth: permission denied")),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":{"grpc_code":2,"http_code":500,"message":"auth: permission denied","http_status":"Internal Server Error"}}"#
                .to_string()
        )
    );
}

#[test]
fn a_stream_of_requests_ends_at_the_first_that_does_not_decode() {
    let m = etcd();
    let two: Vec<WatchRequest> = m
        .stream_requests(
            br#"{"create_request":{"key":"YQ=="}} {"cancel_request":{"watch_id":"1"}}"#,
            "WatchRequest",
        )
        .unwrap();
    assert_eq!(two.len(), 2);
    let one: Vec<WatchRequest> = m
        .stream_requests(
            br#"{"create_request":{"key":"YQ=="}} {nope"#,
            "WatchRequest",
        )
        .unwrap();
    assert_eq!(one.len(), 1, "a later bad request ends the requests");
    let (status, body) = m
        .stream_requests::<WatchRequest>(b"{nope", "WatchRequest")
        .unwrap_err();
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.starts_with(r#"{"error":"invalid character 'n'"#),
        "{body}"
    );
    assert!(body.contains(r#""code":2"#), "{body}");
    assert_eq!(
        m.stream_requests::<WatchRequest>(b"", "WatchRequest"),
        Ok(vec![])
    );
}

#[test]
fn strings_that_are_not_utf8_are_replaced_as_go_writes_them() {
    let m = etcd();
    let desc = m.descriptor("AuthUserListResponse").unwrap();
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
        DynamicMessage::decode(desc.clone(), encoded.as_slice()).is_err(),
        "the JSON descriptors say string"
    );
    let fixed = go_lossy_strings(&desc, &encoded).unwrap();
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
    assert!(DynamicMessage::decode(desc.clone(), fixed.as_slice()).is_ok());
    assert_eq!(
        go_lossy_strings(&desc, &[0x0a, 0x05, 0x01]),
        None,
        "cut short"
    );
    assert_eq!(
        m.to_json(&msg, "AuthUserListResponse").unwrap(),
        r#"{"header":{"cluster_id":"7","revision":"3"},"users":["root","u��","a��b"]}"#
    );
}

#[test]
fn a_grpc_metadata_token_wins_over_authorization() {
    let headers = |pairs: &[(&'static str, &'static str)]| {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, http::HeaderValue::from_static(v));
        }
        h
    };
    assert_eq!(AuthHeader::of(&headers(&[])), AuthHeader::None);
    assert_eq!(
        AuthHeader::of(&headers(&[
            ("authorization", "bad"),
            ("grpc-metadata-token", "good"),
            ("grpc-metadata-token", "second"),
        ])),
        AuthHeader::Token("good".into())
    );
    assert_eq!(
        AuthHeader::of(&headers(&[
            ("grpc-metadata-authorization", "meta"),
            ("authorization", "Bearer t"),
        ])),
        AuthHeader::Authorization("Bearer t".into())
    );
    assert_eq!(
        AuthHeader::of(&headers(&[("grpc-metadata-authorization", "meta")])),
        AuthHeader::Authorization("meta".into())
    );
}
