//! Generates the client from `protos/` with protox (no system `protoc`) and
//! tonic-prost-build, client side only.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=protos");
    let fds = protox::compile(["protos/etcd37.proto"], ["protos"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
