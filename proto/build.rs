//! Compiles the .proto files under `protos/` with protox (pure Rust, so no
//! system `protoc` is needed) and hands the descriptor set to
//! tonic-prost-build for message and gRPC client/server generation.

use std::error::Error;

const PROTO_ROOT: &str = "protos";

const PROTO_FILES: &[&str] = &[
    "protos/mvccpb/kv.proto",
    "protos/authpb/auth.proto",
    "protos/etcdserverpb/rpc.proto",
    "protos/actcdpb/internal.proto",
    "protos/v3lockpb/v3lock.proto",
    "protos/v3electionpb/v3election.proto",
];

fn main() -> Result<(), Box<dyn Error>> {
    // compile_fds does not emit rerun directives on its own.
    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    for file in PROTO_FILES {
        println!("cargo:rerun-if-changed={file}");
    }

    let fds = protox::compile(PROTO_FILES, [PROTO_ROOT])?;
    // The descriptors themselves, for the JSON gateway's proto3 JSON mapping.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;

    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;

    Ok(())
}
