use std::net::SocketAddr;
use std::sync::Arc;

use actcd_proto::etcdserverpb::auth_server::AuthServer;
use actcd_proto::etcdserverpb::cluster_server::ClusterServer;
use actcd_proto::etcdserverpb::kv_server::KvServer;
use actcd_proto::etcdserverpb::lease_server::LeaseServer;
use actcd_proto::etcdserverpb::maintenance_server::MaintenanceServer;
use actcd_proto::etcdserverpb::watch_server::WatchServer;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;

use crate::auth::AuthService;
use crate::cluster::ClusterService;
use crate::election::ElectionService;
use crate::kv::KvService;
use crate::lease::LeaseService;
use crate::lock::LockService;
use crate::maintenance::MaintenanceService;
use crate::metrics::Counted;
use crate::pipeline::Pipeline;
use crate::tls::{ClientTls, server_builder};
use crate::watch::WatchService;
use actcd_proto::v3electionpb::election_server::ElectionServer;
use actcd_proto::v3lockpb::lock_server::LockServer;

/// Serves the client API on an already bound listener until `shutdown` resolves: over TLS with
/// `tls` (an `https://` URL), else plain.
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
    let maintenance = MaintenanceServer::new(MaintenanceService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let lease = LeaseServer::new(LeaseService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit);
    let watch = WatchServer::new(WatchService {
        pipeline: pipeline.clone(),
    })
    .max_decoding_message_size(limit)
    .max_encoding_message_size(usize::MAX);
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
    let cluster = ClusterServer::new(ClusterService { pipeline }).max_decoding_message_size(limit);
    server_builder(tls.as_ref())?
        .layer(front_layer)
        .add_service(kv)
        .add_service(maintenance)
        .add_service(lease)
        .add_service(watch)
        .add_service(cluster)
        .add_service(auth)
        .add_service(lock)
        .add_service(election)
        .serve_with_incoming_shutdown(
            sniffed(listener, counters, tls.is_none().then_some(http)),
            shutdown,
        )
        .await
}

/// Accepted connections for tonic. With `http1` (plain TCP), each connection's first bytes are
/// looked at first, on a task of its own: HTTP/2 (gRPC) goes to tonic, anything else is served
/// as HTTP/1.1 (`/health`, `/metrics`…), as etcd serves both on its client port.
/// Every connection counts its bytes into the front's counters.
fn sniffed(
    listener: TcpListener,
    counters: Arc<crate::metrics::FrontCounters>,
    http1: Option<Arc<Pipeline>>,
) -> impl futures::Stream<Item = std::io::Result<Counted<tokio::net::TcpStream>>> {
    use futures::StreamExt;
    let Some(pipeline) = http1 else {
        return incoming(listener)
            .map(move |conn| conn.map(|s| Counted::new(s, &counters)))
            .boxed();
    };
    let (tx, rx) = tokio::sync::mpsc::channel(128);
    tokio::spawn(async move {
        let mut accepted = incoming(listener);
        while let Some(conn) = accepted.next().await {
            let Ok(stream) = conn else {
                continue;
            };
            let (to_grpc, pipeline) = (tx.clone(), pipeline.clone());
            tokio::spawn(async move {
                let mut first = [0u8; 3];
                let peeked = tokio::time::timeout(std::time::Duration::from_secs(10), async {
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
                    Ok(true) => crate::http::serve_connection(stream, pipeline).await,
                    _ => {}
                }
            });
            if tx.is_closed() {
                break;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx).boxed()
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
                    tokio::spawn(crate::http::serve_connection(stream, pipeline.clone()));
                }
                Some(Err(_)) => continue,
                None => return,
            },
        }
    }
}

/// Accepted connections with Nagle's algorithm off: `Server::tcp_nodelay` only applies to
/// listeners tonic binds itself, and a small response held back for a delayed ACK costs 40 ms.
/// With TLS, tonic runs the handshake on these streams.
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
