//! # actcd-etcd37-client — etcd 3.7's RangeStream as a client sees it (tests only)
//!
//! A gRPC client generated from `protos/etcd37.proto`, a proto of this crate's own that
//! declares the slice of etcd 3.7's API RangeStream needs (the KV service's `Range` and
//! `RangeStream`, their messages, `mvccpb.KeyValue`) with etcd's package names, field names and
//! numbers. actcd's integration tests call RangeStream through it, so what they check is the
//! wire, not code shared with the server. Nothing here is published or used by the daemon.

/// etcd's `mvccpb.KeyValue`.
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
}

/// The KV service's `Range` and `RangeStream`, the Maintenance service's `Status` and `HashKV`
/// (clients only), and their messages.
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
}
