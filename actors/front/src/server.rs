//! The client port: the tonic router of every service, the HTTP/1.1 side beside it on the same
//! port (plain and TLS), and the metrics listener.
use std::net::SocketAddr;
use std::sync::Arc;

use actcd_proto::etcdserverpb::auth_server::AuthServer;
use actcd_proto::etcdserverpb::cluster_server::ClusterServer;
use actcd_proto::etcdserverpb::kv_server::KvServer;
use actcd_proto::etcdserverpb::lease_server::LeaseServer;
use actcd_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use crate::auth::AuthService;
use crate::cluster::ClusterService;
use crate::election::ElectionService;
use crate::kv::KvService;
use crate::lease::LeaseService;
use crate::lock::LockService;
use crate::maintenance::MaintenanceService;
use crate::metrics::Counted;
use crate::pipeline::Pipeline;
use crate::tls::ClientTls;
use actcd_proto::v3electionpb::election_server::ElectionServer;
use actcd_proto::v3lockpb::lock_server::LockServer;

/// How long an accept loop waits after a failed accept (the peer port's pause).
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// Serves the client API on an already bound listener until `shutdown` resolves: over TLS with
/// `tls` (an `https://` URL), else plain. Either way gRPC and HTTP/1.1 share the port, as on
/// etcd's: plain connections are routed by [`sniffed`], TLS ones by [`decrypted`], which runs
/// the handshake itself so that it can route what it decrypts (tonic's own TLS would take every
/// connection as HTTP/2). The tonic server therefore never has a TLS config of its own.
pub async fn serve(
    listener: TcpListener,
    pipeline: Arc<Pipeline>,
    tls: Option<ClientTls>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let limit = pipeline.config.max_recv_bytes;
    let kv = KvServer::new(KvService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit)
    .max_encoding_message_size(usize::MAX);
    let kv = crate::range_route::kv_routes(kv, pipeline.clone(), limit);
    let maintenance = MaintenanceServer::new(MaintenanceService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let lease = LeaseServer::new(LeaseService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let watch = crate::watch_route::watch_routes(pipeline.clone(), limit);
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
    let http = pipeline.clone();
    let counters = pipeline.counters.clone();
    let (keepalive, max_streams) = (
        pipeline.config.grpc_keepalive,
        pipeline.config.max_concurrent_streams,
    );
    let cluster = ClusterServer::new(ClusterService { pipeline }).max_decoding_message_size(limit);
    let router = Server::builder()
        .http2_keepalive_interval(keepalive.map(|(interval, _)| interval))
        .http2_keepalive_timeout(keepalive.map(|(_, timeout)| timeout))
        .max_concurrent_streams(max_streams)
        .layer(tower_layer::layer_fn(|inner| TlsPeerAddr { inner }))
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
    match tls {
        None => {
            let incoming = sniffed(listener, http).map(|conn| conn.map(AuthorityFix::new));
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
        Some(tls) => {
            let incoming = decrypted(listener, tls, counters, Some(http))
                .map(|conn| conn.map(AuthorityFix::new));
            router
                .serve_with_incoming_shutdown(incoming, shutdown)
                .await
        }
    }
}

/// How long a connection may take to send the first bytes that [`route`] looks at.
const SNIFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Accepted plain-TCP connections for tonic. Each connection's first bytes are looked at first,
/// on a task of its own: HTTP/2 (gRPC) goes to tonic, anything else is served as HTTP/1.1
/// (`/health`, `/metrics`…), as etcd serves both on its client port. Every connection counts
/// its bytes into the front's counters.
fn sniffed(
    listener: TcpListener,
    pipeline: Arc<Pipeline>,
) -> impl futures::Stream<Item = std::io::Result<Counted<TcpStream>>> {
    per_connection(listener, move |stream, to_grpc| {
        let pipeline = pipeline.clone();
        async move {
            let mut first = [0u8; 3];
            let peeked = tokio::time::timeout(SNIFF_TIMEOUT, async {
                loop {
                    match stream.peek(&mut first).await {
                        Ok(n) if n >= first.len() => return true,
                        Ok(0) | Err(_) => return false,
                        Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
                    }
                }
            })
            .await;
            let stream = Counted::new(stream, &pipeline.counters);
            match peeked {
                Ok(true) if crate::http::is_http2_preface(&first) => {
                    let _ = to_grpc.send(Ok(stream)).await;
                }
                Ok(true) => {
                    crate::http::serve_connection(stream, pipeline, crate::http::Port::Plain).await
                }
                _ => {}
            }
        }
    })
}

/// A TLS connection as tonic gets it: the first bytes [`decrypted`] read to route it, then the
/// rest of the decrypted stream. The byte count is taken under TLS, so handshakes and record
/// overhead count as they did when tonic ran the handshake on a counted socket.
pub(crate) type TlsConn = Rewound<tokio_rustls::server::TlsStream<Counted<TcpStream>>>;

/// Accepted TLS connections for tonic. Each connection's handshake runs on a task of its own
/// (a slow or silent client holds only its own task, for at most the handshake timeout), with
/// the rules of [`ClientTls`]; a failed handshake drops the connection. Then, by the ALPN
/// protocol agreed: `h2` goes to tonic; none or `http/1.1` is routed by its first decrypted
/// bytes as [`sniffed`] routes plain ones — HTTP/2's preface to tonic, anything else to the
/// HTTP/1.1 handler. With no `http1` (tests), every connection goes to tonic.
///
/// tonic gets the `TlsStream` itself (inside [`Rewound`], which passes its connection info
/// through), for which it implements `Connected` with `TlsConnectInfo`: so
/// `Request::peer_certs`, and with it `--client-cert-auth`, work as with tonic's own TLS.
/// The first byte of every TLS connection: a handshake record (ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

pub(crate) fn decrypted(
    listener: TcpListener,
    tls: ClientTls,
    counters: Arc<crate::metrics::FrontCounters>,
    http1: Option<Arc<Pipeline>>,
) -> impl futures::Stream<Item = std::io::Result<TlsConn>> {
    per_connection(listener, move |mut stream, to_grpc| {
        let (tls, counters, http1) = (tls.clone(), counters.clone(), http1.clone());
        async move {
            // A connection that does not open with a TLS handshake record (plain HTTP sent to
            // the https port) is closed without a word, as etcd's listener closes it: no TLS
            // alert, which such a client could not read anyway.
            let mut first = [0u8; 1];
            match tokio::time::timeout(SNIFF_TIMEOUT, stream.peek(&mut first)).await {
                Ok(Ok(1)) if first[0] == TLS_HANDSHAKE_RECORD => {}
                Ok(Ok(1)) => {
                    // Read what it sent before closing, so the close is a clean one (unread
                    // bytes would turn it into a reset).
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut sink = [0u8; 4096];
                    while let Ok(Ok(n)) = tokio::time::timeout(
                        std::time::Duration::from_millis(50),
                        stream.read(&mut sink),
                    )
                    .await
                    {
                        if n == 0 {
                            break;
                        }
                    }
                    let _ = stream.shutdown().await;
                    return;
                }
                _ => return,
            }
            let Ok(mut stream) = tls.accept(Counted::new(stream, &counters)).await else {
                return;
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(crate::tls::ALPN_H2);
            let Some(pipeline) = http1.filter(|_| !h2) else {
                let _ = to_grpc.send(Ok(Rewound::new(Vec::new(), stream))).await;
                return;
            };
            let mut first = [0u8; 3];
            let read = tokio::time::timeout(SNIFF_TIMEOUT, async {
                let mut n = 0;
                while n < first.len() {
                    match stream.read(&mut first[n..]).await {
                        Ok(0) | Err(_) => return false,
                        Ok(k) => n += k,
                    }
                }
                true
            })
            .await;
            if read != Ok(true) {
                return;
            }
            let stream = Rewound::new(first.to_vec(), stream);
            if crate::http::is_http2_preface(&first) {
                let _ = to_grpc.send(Ok(stream)).await;
            } else {
                crate::http::serve_connection(stream, pipeline, crate::http::Port::Tls).await;
            }
        }
    })
}

/// Accepts connections and hands each to `route` on a task of its own; `route` sends those
/// meant for tonic down the channel it gets, whose other end is the returned stream. Accepting
/// stops, closing the listener, once tonic has dropped that stream (at shutdown).
fn per_connection<IO, F, Fut>(
    listener: TcpListener,
    route: F,
) -> impl futures::Stream<Item = std::io::Result<IO>>
where
    IO: Send + 'static,
    F: Fn(TcpStream, tokio::sync::mpsc::Sender<std::io::Result<IO>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use futures::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    tokio::spawn(async move {
        let mut accepted = incoming(listener);
        loop {
            tokio::select! {
                () = tx.closed() => break,
                conn = accepted.next() => match conn {
                    Some(Ok(stream)) => {
                        tokio::spawn(route(stream, tx.clone()));
                    }
                    Some(Err(_)) => {
                    // Out of file descriptors, say: pause as the peer port does, not spin.
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
                    None => break,
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

/// Puts a TLS connection's `TcpConnectInfo` in the request's extensions beside its
/// `TlsConnectInfo`, as tonic's own TLS did, so what reads the peer's address from
/// `TcpConnectInfo` (the front's request log) finds it over TLS too.
#[derive(Clone)]
struct TlsPeerAddr<S> {
    inner: S,
}

impl<S, B> tower_service::Service<http::Request<B>> for TlsPeerAddr<S>
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
        let tcp = req
            .extensions()
            .get::<TlsConnectInfo<TcpConnectInfo>>()
            .map(|tls| tls.get_ref().clone());
        if let Some(tcp) = tcp {
            req.extensions_mut().insert(tcp);
        }
        self.inner.call(req)
    }
}

/// Serves HTTP/1.1 only (`--listen-metrics-urls`): `/health`, `/metrics` and friends.
pub async fn serve_metrics(
    listener: TcpListener,
    pipeline: Arc<Pipeline>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    use futures::StreamExt;
    let mut accepted = incoming(listener);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            conn = accepted.next() => match conn {
                Some(Ok(stream)) => {
                    tokio::spawn(crate::http::serve_connection(
                        stream,
                        pipeline.clone(),
                        crate::http::Port::Metrics,
                    ));
                }
                Some(Err(_)) => {
                    // Out of file descriptors, say: pause as the peer port does, not spin.
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
                None => return,
            },
        }
    }
}

/// Accepted connections with Nagle's algorithm off: `Server::tcp_nodelay` only applies to
/// listeners tonic binds itself, and a small response held back for a delayed ACK costs 40 ms.
pub(crate) fn incoming(
    listener: TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use futures::StreamExt;
    TcpListenerStream::new(listener).map(|conn| {
        conn.inspect(|s| {
            let _ = s.set_nodelay(true);
        })
    })
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
