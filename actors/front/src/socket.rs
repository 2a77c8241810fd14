//! A client listener's sockets, TCP or unix (etcd's `unix://` and `unixs://` client URLs), and
//! what one listener serves: etcd's `serveCtx`, which holds every client URL of one address —
//! `http://` and `https://` on the same port make one listener that is both insecure and
//! secure — and, with `--listen-client-http-urls`, whether it serves gRPC, HTTP or both.
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::tls::ClientTls;

/// A bound client listener.
#[derive(Debug)]
pub enum ClientListener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl ClientListener {
    /// The next connection, with Nagle's algorithm off on TCP (`Server::tcp_nodelay` only
    /// applies to listeners tonic binds itself, and a small response held back for a delayed
    /// ACK costs 40 ms).
    pub async fn accept(&self) -> std::io::Result<Socket> {
        match self {
            ClientListener::Tcp(l) => {
                let (s, _) = l.accept().await?;
                let _ = s.set_nodelay(true);
                Ok(Socket::Tcp(s))
            }
            ClientListener::Unix(l) => Ok(Socket::Unix(l.accept().await?.0)),
        }
    }

    /// The address as etcd logs it: `host:port`, or the socket's path.
    pub fn address(&self) -> String {
        match self {
            ClientListener::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            ClientListener::Unix(l) => l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                .unwrap_or_default(),
        }
    }
}

impl From<TcpListener> for ClientListener {
    fn from(l: TcpListener) -> Self {
        ClientListener::Tcp(l)
    }
}

/// An accepted client connection.
#[derive(Debug)]
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Socket::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Socket::Tcp(s) => s.is_write_vectored(),
            Socket::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_flush(cx),
            Socket::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A unix socket's connection has no addresses: its `TcpConnectInfo` is empty, so that what
/// reads the peer's address (the request log) and the client certificate (`TlsConnectInfo` of
/// a `TcpConnectInfo`, what `Request::peer_certs` looks for) work the same over `unixs://`.
impl Connected for Socket {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        match self {
            Socket::Tcp(s) => s.connect_info(),
            Socket::Unix(_) => TcpConnectInfo {
                local_addr: None,
                remote_addr: None,
            },
        }
    }
}

/// Which traffic a client listener serves. Without `--listen-client-http-urls` every client
/// URL serves both; with it, `--listen-client-urls` serve gRPC only and the HTTP URLs HTTP
/// only (etcd's `splitHttp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Traffic {
    #[default]
    GrpcAndHttp,
    Grpc,
    Http,
}

impl Traffic {
    pub fn grpc(self) -> bool {
        self != Traffic::Http
    }

    pub fn http(self) -> bool {
        self != Traffic::Grpc
    }

    /// etcd's `traffic` log field.
    pub fn name(self) -> &'static str {
        match self {
            Traffic::GrpcAndHttp => "grpc+http",
            Traffic::Grpc => "grpc",
            Traffic::Http => "http",
        }
    }
}

/// What one client listener serves (etcd's `serveCtx`): plain connections when one of its URLs
/// is `http://` or `unix://`, TLS ones with `tls` when one is `https://` or `unixs://` (both on
/// one port: a connection opening with a TLS handshake record is TLS, any other plain), and
/// which traffic.
#[derive(Debug, Clone, Default)]
pub struct Listening {
    pub insecure: bool,
    pub tls: Option<ClientTls>,
    pub traffic: Traffic,
}
