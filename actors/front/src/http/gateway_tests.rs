//! Tests of the front's `http/gateway.rs` (its `tests` module, included from there by `#[path]`).

use actcd_proto::etcdserverpb::{PutRequest, RangeResponse, ResponseHeader};
use actcd_proto::mvccpb::KeyValue;

use super::*;

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
    assert_eq!(
        to_json(&resp, "RangeResponse").unwrap(),
        r#"{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"}"#
    );
    // Requests take proto names, JSON names and strings or numbers for 64-bit fields.
    let put: PutRequest = from_json(
        br#"{"key":"Zm9v","value":"YmFy","prev_kv":true,"lease":"7"}"#,
        "PutRequest",
    )
    .unwrap();
    assert_eq!(
        (put.key.as_slice(), put.prev_kv, put.lease),
        (&b"foo"[..], true, 7)
    );
    let put: PutRequest = from_json(br#"{"key":"Zm9v","prevKv":true}"#, "PutRequest").unwrap();
    assert!(put.prev_kv);
    assert!(from_json::<PutRequest>(b"{not json", "PutRequest").is_err());
}

#[test]
fn errors_carry_grpc_gateways_status() {
    let (status, body) = error_answer(&actcd_types::EtcdError::EmptyKey.to_status());
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        r#"{"error":"etcdserver: key is not provided","code":3,"message":"etcdserver: key is not provided"}"#
    );
    assert_eq!(
        http_status(tonic::Code::Unauthenticated),
        StatusCode::UNAUTHORIZED
    );
}
