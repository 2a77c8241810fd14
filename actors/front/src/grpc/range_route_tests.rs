//! Tests of the front's `range_route.rs` (its `tests` module, included from there by `#[path]`).

use super::*;
use actcd_proto::etcdserverpb::RangeResponse;

/// A stand-in for the store's encoded answer: the prost encoding of a message.
struct Bytes(Vec<u8>);

impl actcd_types::msg::EncodedRange for Bytes {
    fn encoded_len(&self) -> usize {
        self.0.len()
    }
    fn write(&self, out: &mut dyn bytes::BufMut) -> Result<(), EtcdError> {
        out.put_slice(&self.0);
        Ok(())
    }
}

/// The gRPC message bytes tonic's server body carries for `item` (its 5-byte prefix
/// off).
async fn encoded(item: RangeAnswer) -> Vec<u8> {
    use http_body_util::BodyExt;
    let source = tokio_stream::iter(vec![Ok::<_, Status>(item)]);
    let body =
        tonic::codec::EncodeBody::new_server(RangeEncoder, source, None, Default::default(), None);
    let mut body = std::pin::pin!(body);
    let frame = body.frame().await.unwrap().unwrap();
    frame.into_data().unwrap()[5..].to_vec()
}

#[tokio::test]
async fn both_forms_of_an_answer_encode_to_the_same_bytes() {
    let resp = RangeResponse {
        kvs: vec![actcd_proto::mvccpb::KeyValue {
            key: b"k".to_vec(),
            value: vec![7; 100_000],
            ..Default::default()
        }],
        more: true,
        count: 3,
        ..Default::default()
    };
    let want = resp.encode_to_vec();
    let decoded = encoded(RangeAnswer::Decoded(resp)).await;
    let lazy = encoded(RangeAnswer::Encoded(Box::new(Bytes(want.clone())))).await;
    assert_eq!(decoded, want);
    assert_eq!(lazy, want);
}
