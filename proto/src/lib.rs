//! Wire types for actcd.
//!
//! This crate owns two things:
//!
//! * etcd v3.5's client protocol (`mvccpb`, `authpb`, `etcdserverpb`, and the
//!   lock and election services `v3lockpb`, `v3electionpb`), written
//!   out with etcd's exact package, message, field and enum names and numbers
//!   so that unmodified etcd clients can talk to actcd;
//! * actcd's own replicated-log envelope (`actcdpb`): the
//!   [`actcdpb::InternalRaftRequest`] that is proposed through raft (field
//!   numbers mirror etcd's `raft_internal.proto`) and the
//!   [`actcdpb::RaftMessage`] frame used to carry encoded raft-rs messages
//!   between peers.
//!
//! Code is generated at build time by prost/tonic from the files in `protos/`.
//! The .proto files are parsed with `protox`, a pure-Rust compiler, so building
//! this crate needs no system `protoc` installation.
//!
//! The generated modules are siblings at the crate root because generated code
//! refers across packages with `super::mvccpb::...` style paths.

/// etcd's storage records: `KeyValue` and watch `Event`.
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// etcd's auth records: users, roles and permissions.
pub mod authpb {
    tonic::include_proto!("authpb");
}

/// etcd's gRPC API: the KV, Watch, Lease, Cluster, Maintenance and Auth
/// services with their request/response messages.
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}

/// etcd's server-side lock service (`v3lockpb.Lock`).
pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
}

/// etcd's server-side election service (`v3electionpb.Election`).
pub mod v3electionpb {
    tonic::include_proto!("v3electionpb");
}

/// actcd-internal messages: the raft proposal envelope and peer frames.
pub mod actcdpb {
    tonic::include_proto!("actcdpb");
}

/// The encoded `FileDescriptorSet` of every proto above (for proto3 JSON, as etcd's gRPC
/// gateway speaks it).
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor.bin"));

#[cfg(test)]
mod tests {
    use prost::Message;

    use crate::actcdpb::{InternalRaftRequest, RequestHeader};
    use crate::etcdserverpb::{PutRequest, RangeRequest};

    #[test]
    fn internal_raft_request_round_trips() {
        let req = InternalRaftRequest {
            header: Some(RequestHeader {
                id: 42,
                username: b"root".to_vec(),
                auth_revision: 7,
                internal: true,
            }),
            id: 42,
            put: Some(PutRequest {
                key: b"foo".to_vec(),
                value: b"bar".to_vec(),
                lease: 9,
                prev_kv: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let decoded = InternalRaftRequest::decode(bytes.as_slice()).expect("decode");
        assert_eq!(decoded, req);
        assert!(decoded.range.is_none());
    }

    #[test]
    fn range_request_uses_etcd_field_numbers() {
        let req = RangeRequest {
            key: b"a".to_vec(),
            range_end: b"b".to_vec(),
            limit: 5,
            ..Default::default()
        };
        // field 1 (key, len-delimited), field 2 (range_end), field 3 (limit, varint)
        assert_eq!(
            req.encode_to_vec(),
            vec![0x0a, 1, b'a', 0x12, 1, b'b', 0x18, 5]
        );
    }
}
