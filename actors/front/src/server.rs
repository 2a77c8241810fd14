//! The client port: the tonic router of every service, the HTTP side beside it on the same
//! port, plain and TLS on one port routed by each connection's first bytes, and the metrics
//! listener.
use std::net::SocketAddr;
use std::sync::Arc;

use actcd_proto::etcdserverpb::auth_server::AuthServer;
use actcd_proto::etcdserverpb::cluster_server::ClusterServer;
use actcd_proto::etcdserverpb::kv_server::KvServer;
use actcd_proto::etcdserverpb::lease_server::LeaseServer;
use actcd_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use crate::grpc::auth::AuthService;
use crate::grpc::cluster::ClusterService;
use crate::grpc::election::ElectionService;
use crate::grpc::kv::KvService;
use crate::grpc::lease::LeaseService;
use crate::grpc::lock::LockService;
use crate::grpc::maintenance::MaintenanceService;
use crate::metrics::Counted;
use crate::pipeline::Pipeline;
use crate::socket::{ClientListener, Listening, Socket};
use crate::tls::ClientTls;
use actcd_proto::v3electionpb::election_server::ElectionServer;
use actcd_proto::v3lockpb::lock_server::LockServer;

/// How long an accept loop waits after a failed accept (the peer port's pause).
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// Serves the client API on an already bound listener until `shutdown` resolves, as etcd's
/// `serveCtx.serve` does: plain, TLS, or both on one port (`listening`), and gRPC, HTTP or
/// both (`listening.traffic`). Every connection is routed by its first bytes in [`routed`]: a
/// TLS handshake record is TLS (whose handshake is run here, so that what it decrypts can be
/// routed too: tonic's own TLS would take every connection as HTTP/2), HTTP/2's preface is
/// gRPC, anything else HTTP/1.1. The tonic server therefore never has a TLS config of its own.
pub async fn serve(
    listener: impl Into<ClientListener>,
    pipeline: Arc<Pipeline>,
    listening: Listening,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let listener = listener.into();
    let limit = pipeline.config.max_recv_bytes;
    let kv = KvServer::new(KvService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit)
    .max_encoding_message_size(usize::MAX);
    let kv = crate::grpc::range_route::kv_routes(kv, pipeline.clone(), limit);
    let maintenance = MaintenanceServer::new(MaintenanceService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let lease = LeaseServer::new(LeaseService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let watch = crate::grpc::watch_route::watch_routes(pipeline.clone(), limit);
    let auth = AuthServer::new(AuthService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let lock = LockServer::new(LockService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let election = ElectionServer::new(ElectionService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let front_layer = crate::metrics::Accounting {
        stats: pipeline.requests.clone(),
        learner: pipeline.routes.learner.clone(),
    };
    let routing = Routing {
        counters: pipeline.counters.clone(),
        http: Some(pipeline.clone()),
        listening,
    };
    let (keepalive, max_streams) = (
        pipeline.config.grpc_keepalive,
        pipeline.config.max_concurrent_streams,
    );
    let cluster = ClusterServer::new(ClusterService { pipeline }).max_decoding_message_size(limit);
    let router = Server::builder()
        .http2_keepalive_interval(keepalive.map(|(interval, _)| interval))
        .http2_keepalive_timeout(keepalive.map(|(_, timeout)| timeout))
        .max_concurrent_streams(max_streams)
        .layer(tower_layer::layer_fn(|inner| PeerInfo { inner }))
        .layer(front_layer)
        .add_service(kv)
        .add_service(maintenance)
        .add_service(lease)
        .add_service(watch)
        .add_service(cluster)
        .add_service(auth)
        .add_service(lock)
        .add_service(election);
    // Every HTTP/2 connection passes through `AuthorityFix`, for etcd 3.4's Go client.
    use actcd_h2authority::AuthorityFix;
    use futures::StreamExt;
    let incoming = routed(listener, routing).map(|conn| conn.map(AuthorityFix::new));
    router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// How long a connection may take to send the first bytes that [`routed`] looks at.
const SNIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The first byte of every TLS connection: a handshake record (ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A connection as tonic gets it: plain, or TLS (decrypted here), each with the first bytes
/// read to route it read again first. The byte count is taken under TLS, so handshakes and
/// record overhead count as they did when tonic ran the handshake on a counted socket.
pub(crate) enum Conn {
    Plain(Rewound<Counted<Socket>>),
    Tls(Box<TlsConn>),
}

/// A decrypted connection for tonic.
pub(crate) type TlsConn = Rewound<tokio_rustls::server::TlsStream<Rewound<Counted<Socket>>>>;

/// What tonic puts in a request's extensions for a [`Conn`]; [`PeerInfo`] turns it into the
/// `TcpConnectInfo` and `TlsConnectInfo` the services read.
#[derive(Clone)]
pub(crate) enum ConnInfo {
    Plain(TcpConnectInfo),
    Tls(TlsConnectInfo<TcpConnectInfo>),
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        match self {
            Conn::Plain(s) => ConnInfo::Plain(s.connect_info()),
            Conn::Tls(s) => ConnInfo::Tls(s.connect_info()),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => std::pin::Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => std::pin::Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => std::pin::Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => std::pin::Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => std::pin::Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

/// How [`routed`] routes one listener's connections.
#[derive(Clone)]
struct Routing {
    counters: Arc<crate::metrics::FrontCounters>,
    /// Where HTTP (not gRPC) connections are served; `None` (tests): every connection that
    /// gets through goes to tonic.
    http: Option<Arc<Pipeline>>,
    listening: Listening,
}

/// Accepted connections for tonic, each routed by its first bytes on a task of its own (a slow
/// or silent client holds only its own task), as etcd's cmux routes them:
/// - a TLS handshake record (`0x16`), when the listener serves TLS: the handshake, with the
///   rules of [`ClientTls`] (a failed one drops the connection), then by the ALPN protocol
///   agreed — `h2` is HTTP/2; none or `http/1.1` is routed by its first decrypted bytes;
/// - otherwise, when the listener serves plain connections: HTTP/2's preface is gRPC,
///   anything else HTTP/1.1 (`/health`, `/metrics`, the gateway…);
/// - otherwise (plain bytes on a TLS-only listener) the connection is closed without a word,
///   as etcd's TLS listener closes it: no TLS alert, which such a client could not read.
///
/// Then by the listener's traffic (`--listen-client-http-urls`): HTTP/2 goes to tonic where
/// gRPC is served; on an HTTP-only listener HTTP/2 over TLS is served by the HTTP handler (a
/// gRPC call there is answered 404, as etcd's HTTP server answers it) and plain HTTP/2 is
/// closed (etcd's cmux matches HTTP/1 only there); on a gRPC-only listener HTTP/1.1 is closed
/// unanswered, as grpc-go closes a connection that does not open with HTTP/2's preface.
/// Every connection counts its bytes into the front's counters.
fn routed(
    listener: ClientListener,
    routing: Routing,
) -> impl futures::Stream<Item = std::io::Result<Conn>> {
    per_connection(listener, move |socket, to_grpc| {
        route(socket, routing.clone(), to_grpc)
    })
}

/// Routes one connection (see [`routed`]).
async fn route(
    socket: Socket,
    r: Routing,
    to_grpc: tokio::sync::mpsc::Sender<std::io::Result<Conn>>,
) {
    let mut stream = Counted::new(socket, &r.counters);
    let mut first = Vec::with_capacity(3);
    if !read_at_least(&mut stream, &mut first, 1).await {
        return;
    }
    let traffic = r.listening.traffic;
    let tls = r
        .listening
        .tls
        .as_ref()
        .filter(|_| first[0] == TLS_HANDSHAKE_RECORD);
    if let Some(tls) = tls {
        let Ok(mut stream) = tls.accept(Rewound::new(first, stream)).await else {
            return;
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(crate::tls::ALPN_H2);
        let Some(pipeline) = r.http else {
            let _ = to_grpc
                .send(Ok(Conn::Tls(Box::new(Rewound::new(Vec::new(), stream)))))
                .await;
            return;
        };
        if h2 {
            let stream = Rewound::new(Vec::new(), stream);
            if traffic.grpc() {
                let _ = to_grpc.send(Ok(Conn::Tls(Box::new(stream)))).await;
            } else {
                crate::http::serve_http2_connection(stream, pipeline, crate::http::Port::Tls).await;
            }
            return;
        }
        let mut first = Vec::with_capacity(3);
        if !read_at_least(&mut stream, &mut first, 3).await {
            return;
        }
        let preface = crate::http::is_http2_preface(&first);
        let stream = Rewound::new(first, stream);
        match (preface, traffic.grpc(), traffic.http()) {
            (true, true, _) => {
                let _ = to_grpc.send(Ok(Conn::Tls(Box::new(stream)))).await;
            }
            (false, _, true) => {
                crate::http::serve_connection(stream, pipeline, crate::http::Port::Tls).await
            }
            _ => close_quietly(stream).await,
        }
        return;
    }
    if !r.listening.insecure {
        close_quietly(stream).await;
        return;
    }
    if !read_at_least(&mut stream, &mut first, 3).await {
        return;
    }
    let preface = crate::http::is_http2_preface(&first);
    let stream = Rewound::new(first, stream);
    match (&r.http, preface, traffic.grpc(), traffic.http()) {
        (None, ..) | (_, true, true, _) => {
            let _ = to_grpc.send(Ok(Conn::Plain(stream))).await;
        }
        (Some(pipeline), false, _, true) => {
            crate::http::serve_connection(stream, pipeline.clone(), crate::http::Port::Plain).await
        }
        _ => close_quietly(stream).await,
    }
}

/// Reads until `buf` holds at least `n` bytes, within [`SNIFF_TIMEOUT`]; false when the
/// connection ends, fails or stays silent first.
async fn read_at_least<IO: AsyncRead + Unpin>(
    stream: &mut IO,
    buf: &mut Vec<u8>,
    n: usize,
) -> bool {
    tokio::time::timeout(SNIFF_TIMEOUT, async {
        let mut chunk = [0u8; 3];
        while buf.len() < n {
            let want = (n - buf.len()).min(chunk.len());
            match stream.read(&mut chunk[..want]).await {
                Ok(0) | Err(_) => return false,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        }
        true
    })
    .await
    .unwrap_or(false)
}

/// Closes a connection this listener does not serve without answering it. What it sent is
/// read first (for a moment), so the close is a clean one: unread bytes would turn it into a
/// reset.
async fn close_quietly<IO: AsyncRead + AsyncWrite + Unpin>(mut stream: IO) {
    use tokio::io::AsyncWriteExt;
    let mut sink = [0u8; 4096];
    while let Ok(Ok(n)) =
        tokio::time::timeout(std::time::Duration::from_millis(50), stream.read(&mut sink)).await
    {
        if n == 0 {
            break;
        }
    }
    let _ = stream.shutdown().await;
}

/// Accepted TLS connections for tonic (tests of the handshake rules): a TLS-only listener of
/// [`routed`], every decrypted connection to tonic.
#[cfg(test)]
pub(crate) fn decrypted(
    listener: tokio::net::TcpListener,
    tls: ClientTls,
    counters: Arc<crate::metrics::FrontCounters>,
) -> impl futures::Stream<Item = std::io::Result<TlsConn>> {
    use futures::StreamExt;
    let routing = Routing {
        counters,
        http: None,
        listening: Listening {
            insecure: false,
            tls: Some(tls),
            traffic: crate::socket::Traffic::Grpc,
        },
    };
    routed(ClientListener::Tcp(listener), routing).filter_map(|conn| {
        std::future::ready(match conn {
            Ok(Conn::Tls(s)) => Some(Ok(*s)),
            Ok(Conn::Plain(_)) => None,
            Err(e) => Some(Err(e)),
        })
    })
}

/// Accepts connections and hands each to `route` on a task of its own; `route` sends those
/// meant for tonic down the channel it gets, whose other end is the returned stream. Accepting
/// stops, closing the listener, once tonic has dropped that stream (at shutdown).
fn per_connection<IO, F, Fut>(
    listener: ClientListener,
    route: F,
) -> impl futures::Stream<Item = std::io::Result<IO>>
where
    IO: Send + 'static,
    F: Fn(Socket, tokio::sync::mpsc::Sender<std::io::Result<IO>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => break,
                conn = listener.accept() => match conn {
                    Ok(stream) => {
                        tokio::spawn(route(stream, tx.clone()));
                    }
                    Err(_) => {
                        // Out of file descriptors, say: pause as the peer port does, not spin.
                        tokio::time::sleep(ACCEPT_RETRY).await;
                    }
                },
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// A stream whose first bytes, already read from `inner` to route it, are read again first.
pub(crate) struct Rewound<IO> {
    first: Vec<u8>,
    pos: usize,
    inner: IO,
}

impl<IO> Rewound<IO> {
    fn new(first: Vec<u8>, inner: IO) -> Self {
        Rewound {
            first,
            pos: 0,
            inner,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Rewound<IO> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.pos < this.first.len() {
            let n = buf.remaining().min(this.first.len() - this.pos);
            buf.put_slice(&this.first[this.pos..this.pos + n]);
            this.pos += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Rewound<IO> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for Rewound<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

/// Turns a connection's [`ConnInfo`] into what the services read from a request's
/// extensions, as tonic's own TLS put it there: `TcpConnectInfo` always (the front's request
/// log reads the peer's address from it, over TLS too), and `TlsConnectInfo` for a TLS
/// connection (`Request::peer_certs`, and with it `--client-cert-auth`).
#[derive(Clone)]
struct PeerInfo<S> {
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<B>> for PeerInfo<S>
where
    S: tower_service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        match req.extensions_mut().remove::<ConnInfo>() {
            Some(ConnInfo::Plain(tcp)) => {
                req.extensions_mut().insert(tcp);
            }
            Some(ConnInfo::Tls(tls)) => {
                req.extensions_mut().insert(tls.get_ref().clone());
                req.extensions_mut().insert(tls);
            }
            None => {}
        }
        self.inner.call(req)
    }
}

/// Serves HTTP/1.1 only (`--listen-metrics-urls`): `/health`, `/metrics` and friends, on a
/// TCP port or a unix socket. With `tls` (an `https://` metrics URL) every connection is TLS
/// with the client key pair, as etcd's `createMetricsListener` wraps the listener with the
/// client TLS settings; a plain connection fails its handshake. etcd 3.6 takes `unix://` and
/// `unixs://` metrics URLs too and serves both plain (its unix listener is never wrapped in
/// TLS): the caller gives those no `tls`.
pub async fn serve_metrics(
    listener: crate::socket::ClientListener,
    pipeline: Arc<Pipeline>,
    tls: Option<ClientTls>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            conn = listener.accept() => match conn {
                Ok(stream) => {
                    let pipeline = pipeline.clone();
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let port = crate::http::Port::Metrics;
                        match tls {
                            None => crate::http::serve_connection(stream, pipeline, port).await,
                            Some(tls) => {
                                // A failed handshake (plain HTTP, a silent client) ends here.
                                if let Ok(stream) = tls.accept(stream).await {
                                    crate::http::serve_connection(stream, pipeline, port).await;
                                }
                            }
                        }
                    });
                }
                Err(_) => {
                    // Out of file descriptors, say: pause as the peer port does, not spin.
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
        }
    }
}

/// Parses `http://host:port` or `https://host:port` (etcd's URL flags) into a socket address.
pub fn parse_url(url: &str) -> Option<SocketAddr> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let host_port = rest.trim_end_matches('/');
    host_port.parse().ok().or_else(|| {
        let (host, port) = host_port.rsplit_once(':')?;
        let host = if host == "localhost" {
            "127.0.0.1"
        } else {
            host
        };
        format!("{host}:{port}").parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_rewound_stream_reads_its_first_bytes_again() {
        let (mut client, server) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut client, b" * HTTP/2.0")
            .await
            .unwrap();
        drop(client);
        let mut rewound = Rewound::new(b"PRI".to_vec(), server);
        let mut one = [0u8; 2];
        rewound.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"PR");
        let mut rest = Vec::new();
        rewound.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"I * HTTP/2.0");
    }
}
