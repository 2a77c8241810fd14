//! Compiles the .proto files under `protos/` with protox (pure Rust, so no
//! system `protoc` is needed) and hands the descriptor set to
//! tonic-prost-build for message and gRPC client/server generation.
//!
//! User and role names and passwords are `string` in etcd's protos, but etcd (Go, gogo
//! protobuf) never checks them for UTF-8, so `etcdctl user add $'u\xff'` works
//! there. prost refuses a `string` that is not UTF-8, so the Rust types are
//! generated from a copy of the descriptors in which those fields are `bytes`
//! (the same wire type, so the encoding does not change). The descriptor set
//! written for the JSON gateway keeps etcd's `string`, so JSON shows names as
//! text, as etcd's gateway does.

use std::error::Error;

use prost_types::field_descriptor_proto::Type;
use protox::prost_reflect::prost_types;

const PROTO_ROOT: &str = "protos";

const PROTO_FILES: &[&str] = &[
    "protos/mvccpb/kv.proto",
    "protos/authpb/auth.proto",
    "protos/etcdserverpb/rpc.proto",
    "protos/actcdpb/internal.proto",
    "protos/v3lockpb/v3lock.proto",
    "protos/v3electionpb/v3election.proto",
];

/// `string` fields holding a user or role name or a password, generated as `Vec<u8>`:
/// (package, message, field).
const BYTE_FIELDS: &[(&str, &str, &str)] = &[
    ("authpb", "User", "roles"),
    ("etcdserverpb", "AuthenticateRequest", "name"),
    ("etcdserverpb", "AuthUserAddRequest", "name"),
    ("etcdserverpb", "AuthUserGetRequest", "name"),
    ("etcdserverpb", "AuthUserDeleteRequest", "name"),
    ("etcdserverpb", "AuthUserChangePasswordRequest", "name"),
    ("etcdserverpb", "AuthUserGrantRoleRequest", "user"),
    ("etcdserverpb", "AuthUserGrantRoleRequest", "role"),
    ("etcdserverpb", "AuthUserRevokeRoleRequest", "name"),
    ("etcdserverpb", "AuthUserRevokeRoleRequest", "role"),
    ("etcdserverpb", "AuthRoleAddRequest", "name"),
    ("etcdserverpb", "AuthRoleGetRequest", "role"),
    ("etcdserverpb", "AuthRoleDeleteRequest", "role"),
    ("etcdserverpb", "AuthRoleGrantPermissionRequest", "name"),
    ("etcdserverpb", "AuthRoleRevokePermissionRequest", "role"),
    ("etcdserverpb", "AuthUserGetResponse", "roles"),
    ("etcdserverpb", "AuthRoleListResponse", "roles"),
    ("etcdserverpb", "AuthUserListResponse", "users"),
    ("actcdpb", "RequestHeader", "username"),
    ("actcdpb", "InternalAuthenticateRequest", "name"),
    // Passwords: bcrypt takes bytes.
    ("etcdserverpb", "AuthenticateRequest", "password"),
    ("etcdserverpb", "AuthUserAddRequest", "password"),
    ("etcdserverpb", "AuthUserChangePasswordRequest", "password"),
    ("actcdpb", "InternalAuthenticateRequest", "password"),
];

/// The descriptors with every field of [`BYTE_FIELDS`] turned from `string` into `bytes`.
fn names_as_bytes(
    mut fds: prost_types::FileDescriptorSet,
) -> Result<prost_types::FileDescriptorSet, Box<dyn Error>> {
    let mut found = 0;
    for file in &mut fds.file {
        let package = file.package().to_string();
        for msg in &mut file.message_type {
            let message = msg.name().to_string();
            for field in &mut msg.field {
                let wanted = BYTE_FIELDS
                    .iter()
                    .any(|&(p, m, f)| p == package && m == message && f == field.name());
                if wanted {
                    if field.r#type() != Type::String {
                        return Err(format!(
                            "{package}.{}.{} is not a string",
                            message,
                            field.name()
                        )
                        .into());
                    }
                    field.set_type(Type::Bytes);
                    found += 1;
                }
            }
        }
    }
    if found != BYTE_FIELDS.len() {
        return Err(format!("{found} of {} byte fields found", BYTE_FIELDS.len()).into());
    }
    Ok(fds)
}

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
        .compile_fds(names_as_bytes(fds)?)?;

    Ok(())
}
