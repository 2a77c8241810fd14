//! Listening sockets as etcd opens them: `SO_REUSEADDR` always (Go's listeners set it, as
//! Rust's do), and `SO_REUSEPORT` with `--socket-reuse-port`, so another process may bind the
//! same port (a replacement member started before the old one has stopped).

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// The backlog Go asks for on Linux (`net.core.somaxconn` caps it).
const BACKLOG: u32 = 4096;

/// Binds and listens on `addr`; must run inside a tokio runtime.
pub fn listen(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if reuse_port {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}
