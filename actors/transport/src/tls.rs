//! Peer TLS: the peer port serves TLS when its URL is `https://`, and every connection to an
//! `https://` peer runs TLS with this member's key pair as the client certificate. The rustls
//! configurations come built from the daemon (`--peer-*` flags, auto TLS, Go-compatible
//! verification, CRL, allowed CN/hostname, cipher suites, versions); this module only runs the
//! handshakes, because tonic's own TLS settings take a CA and nothing more:
//! - dialling: tonic is given the URL as `http://` and a connector that opens the TCP
//!   connection and runs the TLS handshake itself (ALPN `h2`, the URL's host as the name);
//! - serving: each accepted connection's handshake runs on a task of its own (a silent peer
//!   holds only its own task, for at most [`HANDSHAKE_TIMEOUT`]), then etcd's check of the
//!   client certificate's SANs against the connecting address (unless
//!   `--experimental-peer-skip-client-san-verification`), then tonic gets the `TlsStream`.
//!
//! `unix://` and `unixs://` peer URLs (etcd #15940) are unix sockets: the file is the URL's
//! host (`unix://localhost:2380` is `./localhost:2380`), listened on and dialled plain. etcd
//! 3.6 is inconsistent about `unixs://`: its listener (`NewUnixListener`, which
//! `newListener` returns before any TLS wrapping, served as is by `servePeers`) is plain, but
//! its dialler (`unixTransport`, which turns `unixs` into `https`) starts a TLS handshake, so
//! two etcd members on `unixs://` peer URLs cannot talk. actcd takes the listener's side on
//! both ends — a unix socket is reached only through the file system, and the listener is
//! what a peer meets — so members on `unixs://` peer URLs talk (plain), as they would if
//! etcd's dialler agreed with its listener.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, ServerConfig};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::codegen::http::Uri;
use tonic::transport::{Channel, Endpoint, Server};

/// How long a peer connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A check of a peer's client certificate (DER) against the address it connects from.
pub type SanCheck = Arc<
    dyn Fn(Vec<u8>, IpAddr) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>>
        + Send
        + Sync,
>;

/// The peer TLS settings, built and checked by the daemon at start-up.
#[derive(Clone)]
pub struct PeerTls {
    /// What the peer port serves.
    pub server: Arc<ServerConfig>,
    /// How this member dials peers.
    pub client: Arc<ClientConfig>,
    /// Whether the peer port requires client certificates (`--peer-client-cert-auth`).
    pub client_cert_auth: bool,
    /// etcd's SAN check of client certificates; `None` with
    /// `--experimental-peer-skip-client-san-verification`.
    pub san_check: Option<SanCheck>,
}

impl std::fmt::Debug for PeerTls {
    /// Never prints the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("client_cert_auth", &self.client_cert_auth)
            .field("san_check", &self.san_check.is_some())
            .finish_non_exhaustive()
    }
}

/// An endpoint for a peer URL, with TLS for `https://`: [`Endpoint`]'s calls this crate uses.
pub struct PeerEndpoint {
    endpoint: Endpoint,
    tls: Option<Arc<ClientConfig>>,
    local: Option<IpAddr>,
    /// A `unix://` or `unixs://` peer's socket file.
    unix: Option<String>,
}

impl PeerEndpoint {
    pub fn timeout(mut self, d: Duration) -> Self {
        self.endpoint = self.endpoint.timeout(d);
        self
    }

    pub fn connect_lazy(self) -> Channel {
        if let Some(path) = self.unix {
            return self
                .endpoint
                .connect_with_connector_lazy(UnixConnector { path });
        }
        match self.tls {
            Some(config) => self.endpoint.connect_with_connector_lazy(TlsConnector {
                config,
                local: self.local,
            }),
            None => self.endpoint.connect_lazy(),
        }
    }

    pub async fn connect(self) -> Result<Channel, tonic::transport::Error> {
        if let Some(path) = self.unix {
            return self
                .endpoint
                .connect_with_connector(UnixConnector { path })
                .await;
        }
        match self.tls {
            Some(config) => {
                self.endpoint
                    .connect_with_connector(TlsConnector {
                        config,
                        local: self.local,
                    })
                    .await
            }
            None => self.endpoint.connect().await,
        }
    }
}

/// An endpoint for a peer URL: TLS for `https://` (which needs the peer TLS settings). With
/// `local`, the connection leaves from that address (etcd's `SetMemberLocalAddr`: the dialer's
/// `LocalAddr`, port 0). A `unix://` or `unixs://` URL dials the socket file its host names,
/// plain (see the module doc).
pub fn endpoint(
    url: &str,
    tls: Option<&PeerTls>,
    local: Option<IpAddr>,
) -> Result<PeerEndpoint, String> {
    if let Some(path) = unix_socket_host(url) {
        if path.is_empty() {
            return Err(format!("unix peer URL without a socket file: {url}"));
        }
        // tonic needs an http URI; the connector ignores it and opens the socket.
        let endpoint = Endpoint::from_static("http://localhost")
            .connect_timeout(Duration::from_secs(1))
            .initial_stream_window_size(PEER_STREAM_WINDOW)
            .initial_connection_window_size(PEER_CONNECTION_WINDOW);
        return Ok(PeerEndpoint {
            endpoint,
            tls: None,
            local: None,
            unix: Some(path.to_string()),
        });
    }
    let (url, tls) = match url.strip_prefix("https://") {
        Some(rest) => {
            let tls = tls.ok_or("an https peer URL needs --peer-cert-file and --peer-key-file")?;
            (format!("http://{rest}"), Some(tls.client.clone()))
        }
        None => (url.to_string(), None),
    };
    let endpoint = Endpoint::from_shared(url)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(1))
        .tcp_nodelay(true)
        .initial_stream_window_size(PEER_STREAM_WINDOW)
        .initial_connection_window_size(PEER_CONNECTION_WINDOW)
        .local_address(local);
    Ok(PeerEndpoint {
        endpoint,
        tls,
        local,
        unix: None,
    })
}

/// The unix socket file of a `unix://` or `unixs://` peer URL, as etcd's
/// `NewListenerWithOpts(u.Host, …)` and its unix dialer name it: the URL's host only.
pub fn unix_socket_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("unix://")
        .or_else(|| url.strip_prefix("unixs://"))?;
    Some(rest.split(['/', '?', '#']).next().unwrap_or_default())
}

/// Opens the unix socket of a `unix://` or `unixs://` peer.
#[derive(Clone)]
struct UnixConnector {
    path: String,
}

impl tonic::codegen::Service<Uri> for UnixConnector {
    type Response = TokioIo<tokio::net::UnixStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let path = self.path.clone();
        Box::pin(async move { Ok(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) })
    }
}

/// A TCP connection to `host:port`, leaving from `local` when given (each address the host
/// resolves to is tried in turn, as Go's dialer does).
async fn dial(host: &str, port: u16, local: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let Some(local) = local else {
        return TcpStream::connect((host, port)).await;
    };
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        let tried = match socket.bind(std::net::SocketAddr::new(local, 0)) {
            Ok(()) => socket.connect(addr).await,
            Err(e) => Err(e),
        };
        match tried {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no address for the peer's host",
        )
    }))
}

/// Opens a TCP connection to the URI's host and port and runs the TLS handshake on it.
#[derive(Clone)]
struct TlsConnector {
    config: Arc<ClientConfig>,
    local: Option<IpAddr>,
}

impl tonic::codegen::Service<Uri> for TlsConnector {
    type Response = TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let (config, local) = (self.config.clone(), self.local);
        Box::pin(async move {
            let invalid = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
            let host = uri
                .host()
                .ok_or_else(|| invalid("peer URL without a host"))?;
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let name = ServerName::try_from(host.clone())
                .map_err(|_| invalid("peer URL host is not a valid TLS name"))?;
            let tcp = dial(&host, port, local).await?;
            tcp.set_nodelay(true)?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await?;
            Ok(TokioIo::new(tls))
        })
    }
}

/// HTTP/2 flow-control windows on the peer port, both ends. hyper's defaults (1 MiB on a
/// server) let a sender have one 1 MiB snapshot chunk in flight before the receiver, on a busy
/// thread, has read it and said so: a follower caught up by snapshot at about 70 MB/s. etcd's
/// rafthttp streams over HTTP/1.1, bounded by TCP alone. The windows bound what one peer
/// connection may buffer unread (a few peers a member).
const PEER_STREAM_WINDOW: u32 = 8 << 20;
const PEER_CONNECTION_WINDOW: u32 = 16 << 20;

/// A server builder for the peer port: TLS when `tls` is given.
pub fn server(tls: Option<&PeerTls>) -> Result<PeerServer, tonic::transport::Error> {
    Ok(PeerServer {
        builder: Server::builder()
            .tcp_nodelay(true)
            .initial_stream_window_size(PEER_STREAM_WINDOW)
            .initial_connection_window_size(PEER_CONNECTION_WINDOW),
        tls: tls.cloned(),
    })
}

/// [`Server`] with the peer port's TLS.
pub struct PeerServer {
    builder: Server,
    tls: Option<PeerTls>,
}

impl PeerServer {
    pub fn add_service(
        mut self,
        svc: actcd_proto::actcdpb::raft_peer_server::RaftPeerServer<crate::PeerService>,
    ) -> PeerRouter {
        PeerRouter {
            router: self.builder.add_service(svc),
            tls: self.tls,
        }
    }
}

/// A peer port's router, served over TLS when it has the settings.
pub struct PeerRouter {
    router: tonic::transport::server::Router,
    tls: Option<PeerTls>,
}

impl PeerRouter {
    pub async fn serve_with_incoming_shutdown(
        self,
        incoming: TcpListenerStream,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), tonic::transport::Error> {
        match self.tls {
            None => {
                self.router
                    .serve_with_incoming_shutdown(incoming, shutdown)
                    .await
            }
            Some(tls) => {
                self.router
                    .serve_with_incoming_shutdown(accepted(incoming, tls), shutdown)
                    .await
            }
        }
    }
}

impl PeerRouter {
    /// Serves a `unix://` or `unixs://` peer socket: plain, as etcd's unix listener is.
    pub async fn serve_unix_with_shutdown(
        self,
        listener: tokio::net::UnixListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), tonic::transport::Error> {
        self.router
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                shutdown,
            )
            .await
    }
}

/// The connections whose handshake (and SAN check) succeeded; the others are dropped.
fn accepted(
    mut incoming: TcpListenerStream,
    tls: PeerTls,
) -> ReceiverStream<std::io::Result<tokio_rustls::server::TlsStream<TcpStream>>> {
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server.clone());
    tokio::spawn(async move {
        loop {
            // Ends with the server: once tonic drops the receiving end, stop listening.
            let conn = tokio::select! {
                _ = tx.closed() => return,
                conn = incoming.next() => conn,
            };
            let tcp = match conn {
                None => return,
                Some(Ok(tcp)) => tcp,
                Some(Err(e)) => {
                    // Out of descriptors, say: don't spin.
                    tracing::warn!(error = %e, "peer port accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let (acceptor, tx, san_check) = (acceptor.clone(), tx.clone(), tls.san_check.clone());
            tokio::spawn(async move {
                let remote = tcp.peer_addr().map(|a| a.ip());
                let Ok(Ok(stream)) =
                    tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                else {
                    return;
                };
                let client_cert = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.as_ref().to_vec());
                if let (Some(check), Some(cert), Ok(remote)) = (san_check, client_cert, remote)
                    && let Err(e) = check(cert, remote).await
                {
                    tracing::warn!(%remote, error = %e, "rejected peer connection: certificate SAN");
                    return;
                }
                let _ = tx.send(Ok(stream)).await;
            });
        }
    });
    ReceiverStream::new(rx)
}
