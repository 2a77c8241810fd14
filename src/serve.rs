//! The client side of a member, as etcd's `embed` starts it: bind the client and metrics
//! listeners, publish this member's name and client URLs through the log, and only once that
//! publish is applied (etcd's `ReadyNotify`) accept client connections and log `ready to serve
//! client requests`.
//!
//! Until then a client's connection waits in the listener's backlog, as it does on etcd's
//! port: a member that says it is ready has a leader, and every tool that acts on the ready
//! line (`member list`, `endpoint status`, a v2 `set`, `move-leader`) finds this member's
//! client URLs. The metrics listeners (`--listen-metrics-urls`) serve from the start, so
//! `/livez` answers and `/readyz` says why the member is not ready, as etcd 3.6's do.

use std::sync::Arc;
use std::time::Duration;

use actcd_corrupt::InitialCheck;
use actcd_front::authn::AuthGate;
use actcd_front::{FrontConfig, Pipeline, PipelineRoutes};
use actcd_types::MemberIdentity;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::node::{API_VERSION, StartError};
use crate::wiring::{front_helpers, front_threads, now_ms};

/// Serves the client API on the tokio runtime until `stop` resolves.
pub(crate) fn serve_clients(
    cfg: &Config,
    (routes, initial_check): (PipelineRoutes, actix::Recipient<InitialCheck>),
    stop: impl std::future::Future<Output = ()> + Send + 'static,
    actors: actix::ArbiterHandle,
) -> Result<(), StartError> {
    let threads = front_threads();
    let helpers = if threads == 0 { front_helpers() } else { 0 };
    let mut builder = if threads == 0 && helpers == 0 {
        // Only the signal handler and the shutdown wait run here.
        tokio::runtime::Builder::new_current_thread()
    } else if threads == 0 {
        // The helpers: they accept on the same listeners as the actors' thread.
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(helpers);
        b
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    let rt = builder
        .enable_all()
        .thread_name("front")
        .build()
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    let pipeline = pipeline(cfg, routes);
    rt.block_on(async move {
        // etcd's InitialCheck: the peer port already serves (peers checking themselves ask
        // it), clients not yet.
        if cfg.flags.experimental_initial_corrupt_check {
            initial_check
                .send(InitialCheck)
                .await
                .map_err(|e| StartError::Runtime(e.to_string()))?
                .map_err(|e| StartError::Corrupt(e.to_string()))?;
        }
        pipeline.follow_auth();
        // Dropped last: the socket files go once their listeners are closed, and also when a
        // later listener fails to bind and the start fails.
        let mut socket_files = SocketFiles::default();
        let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
        // Bound now, so a taken port fails the start at once; accepted only once ready.
        let client_listeners = bind_clients(cfg, &mut socket_files)?;
        serve_metrics(cfg, &pipeline, &stop_tx, &mut socket_files)?;
        tokio::pin!(stop);
        let published = tokio::select! {
            () = &mut stop => false,
            () = publish_attributes(
                &pipeline,
                cfg.member_id,
                &cfg.flags.name,
                &cfg.advertise_client_urls,
            ) => true,
        };
        let mut servers = Vec::new();
        if published {
            for bound in client_listeners {
                servers.push(serve_one(
                    bound,
                    cfg,
                    &pipeline,
                    &stop_tx,
                    (threads, helpers),
                    &actors,
                )?);
            }
            // `AutoPromoteLearners`: while this member leads, it promotes learners that kept up.
            let promoter = cfg
                .gates
                .enabled(crate::config::gates::AUTO_PROMOTE_LEARNERS)
                .then(|| tokio::spawn(actcd_front::auto_promote_learners(pipeline.clone())));
            stop.await;
            if let Some(promoter) = promoter {
                promoter.abort();
            }
        } else {
            drop(client_listeners);
        }
        tracing::info!("shutting down");
        pipeline.close_streams();
        let _ = stop_tx.send(());
        for s in servers {
            // Streams that never end must not hold shutdown hostage.
            let _ = tokio::time::timeout(Duration::from_secs(5), s).await;
        }
        Ok(())
    })
}

/// The front's door to the actors, configured from the flags.
fn pipeline(cfg: &Config, routes: PipelineRoutes) -> Arc<Pipeline> {
    let front_cfg = FrontConfig {
        identity: MemberIdentity {
            cluster_id: cfg.cluster_id,
            member_id: cfg.member_id,
        },
        request_timeout: cfg.request_timeout(),
        election_timeout: Duration::from_millis(cfg.flags.election_timeout),
        version: API_VERSION.to_string(),
        max_txn_ops: cfg.flags.max_txn_ops,
        max_recv_bytes: cfg.flags.max_request_bytes + 512 * 1024,
        debug_stale_reads: std::env::var_os("ACTCD_DEBUG_STALE_READS").is_some_and(|v| v == "1"),
        strict_reconfig_check: cfg.flags.strict_reconfig_check,
        grpc_keepalive: Some((
            cfg.flags.grpc_keepalive_interval,
            cfg.flags.grpc_keepalive_timeout,
        ))
        .filter(|(interval, timeout)| !interval.is_zero() && !timeout.is_zero()),
        max_concurrent_streams: cfg.flags.max_concurrent_streams,
        grpc_gateway: cfg.flags.enable_grpc_gateway,
        quota_bytes: cfg.quota_bytes(),
        feature_gates: cfg.gates.metric_rows(),
        access: actcd_front::http::AccessControl {
            cors: crate::config::comma_list(&cfg.flags.cors),
            host_whitelist: crate::config::comma_list(&cfg.flags.host_whitelist),
        },
    };
    if front_cfg.debug_stale_reads {
        tracing::warn!(
            "ACTCD_DEBUG_STALE_READS=1: linearizable reads skip ReadIndex and may be stale (a \
             deliberately broken member for the robustness suite's control run)"
        );
    }
    let client_cert_auth = cfg
        .client_tls
        .as_ref()
        .is_some_and(|t| t.client_cert_auth());
    let gate = AuthGate::new(client_cert_auth);
    let pipeline = Pipeline::new(routes, front_cfg, gate, now_ms());
    pipeline
        .requests
        .set_extensive(cfg.flags.metrics == "extensive");
    pipeline
}

/// One client listener: every client URL of one address, as etcd's `configureClientListeners`
/// groups them into a `serveCtx` (`http://` and `https://` on one port make one listener that
/// serves both), and what it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientPort {
    /// `host:port`, or a unix socket's path.
    pub address: String,
    pub unix: bool,
    /// Serves plain connections (an `http://` or `unix://` URL).
    pub insecure: bool,
    /// Serves TLS (an `https://` or `unixs://` URL).
    pub secure: bool,
    pub traffic: actcd_front::Traffic,
    /// The URLs, for messages.
    pub urls: Vec<String>,
}

/// etcd's `resolveUrl`: the address a client URL listens on, whether it is TLS, whether it is
/// a unix socket. A unix URL's socket is the file its host and path name, relative to the
/// working directory unless absolute: `unix://localhost:2379` listens on `./localhost:2379`,
/// `unix:///run/etcd.sock` on `/run/etcd.sock`. The URL is checked as etcd's URL flags check
/// it, with etcd's words: since 3.5.13 (#15940) a unix URL need not be `host:port` and may
/// have a path; an http(s) URL must be `host:port` and must not.
pub(crate) fn resolve_url(url: &str) -> Result<(String, bool, bool), String> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (secure, unix) = match scheme {
        "http" => (false, false),
        "https" => (true, false),
        "unix" => (false, true),
        "unixs" => (true, true),
        _ => {
            return Err(format!(
                "URL scheme must be http, https, unix, or unixs: {url}"
            ));
        }
    };
    if unix {
        return Ok((rest.to_string(), secure, unix));
    }
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let port_ok = host
        .rsplit_once(':')
        .is_some_and(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
    if !port_ok {
        return Err(format!(
            "URL address does not have the form \"host:port\": {url}"
        ));
    }
    if !path.is_empty() || rest.contains('/') {
        return Err(format!("URL must not contain a path: {url}"));
    }
    Ok((host.to_string(), secure, unix))
}

/// etcd's `configureClientListeners`: one listener per distinct address of
/// `--listen-client-urls` and `--listen-client-http-urls`. With HTTP URLs given, the client
/// URLs serve gRPC only and the HTTP URLs HTTP only; one address cannot be both.
pub(crate) fn client_ports(
    client_urls: &[String],
    http_urls: &[String],
) -> Result<Vec<ClientPort>, String> {
    use actcd_front::Traffic;
    let mut ports: Vec<ClientPort> = Vec::new();
    let split = !http_urls.is_empty();
    for (url, http_only) in client_urls
        .iter()
        .map(|u| (u, false))
        .chain(http_urls.iter().map(|u| (u, true)))
    {
        let (address, secure, unix) = resolve_url(url)?;
        let traffic = match (split, http_only) {
            (false, _) => Traffic::GrpcAndHttp,
            (true, false) => Traffic::Grpc,
            (true, true) => Traffic::Http,
        };
        let port = match ports.iter_mut().find(|p| p.address == address) {
            Some(p) => {
                if http_only && p.traffic != Traffic::Http {
                    // etcd 3.5's words (3.6 spells the flags --listen-client-urls and
                    // --listen-client-http-urls).
                    return Err(format!(
                        "cannot bind both --client-listen-urls and --client-listen-http-urls on the same url {url}"
                    ));
                }
                p
            }
            None => {
                ports.push(ClientPort {
                    address,
                    unix,
                    insecure: false,
                    secure: false,
                    traffic,
                    urls: Vec::new(),
                });
                ports.last_mut().ok_or("no port")?
            }
        };
        port.secure |= secure;
        port.insecure |= !secure;
        port.unix = unix;
        port.urls.push(url.clone());
    }
    // A gRPC-only port given both schemes serves TLS only, as etcd's: `serveCtx.serve` sets up
    // the plain gRPC server and then replaces it with the TLS one (`server = gs.Serve(sctx.l)`
    // twice; 3.5.8+ and 3.6 alike), so a plain connection meets a TLS handshake.
    for p in ports.iter_mut() {
        if p.traffic == Traffic::Grpc && p.secure {
            p.insecure = false;
        }
    }
    Ok(ports)
}

/// A bound client listener, not yet accepting.
pub(crate) struct BoundPort {
    port: ClientPort,
    listener: actcd_front::ClientListener,
}

/// Binds every client listener (nothing is accepted yet). A unix socket's file is removed
/// first if it exists, as etcd's `NewUnixListener` removes it (a stale socket of a member that
/// did not stop cleanly), and again when the member stops (`files`).
fn bind_clients(cfg: &Config, files: &mut SocketFiles) -> Result<Vec<BoundPort>, StartError> {
    let ports =
        client_ports(&cfg.client_urls, &cfg.client_http_urls).map_err(StartError::Runtime)?;
    ports
        .into_iter()
        .map(|port| {
            let failed = |reason: String| StartError::Listen {
                url: port.urls.join(","),
                reason,
            };
            let listener = if port.unix {
                actcd_front::ClientListener::Unix(
                    files
                        .bind(&port.address)
                        .map_err(|e| failed(e.to_string()))?,
                )
            } else {
                let addr = actcd_front::parse_url(&port.address)
                    .ok_or_else(|| failed("not a host:port address".into()))?;
                actcd_front::ClientListener::Tcp(
                    crate::listen::listen(addr, cfg.flags.socket_reuse_port)
                        .map_err(|e| failed(e.to_string()))?,
                )
            };
            Ok(BoundPort { port, listener })
        })
        .collect()
}

/// Starts accepting clients on one bound listener: on the front's runtime, or on the actors'
/// thread when the front shares it (`front_threads() == 0`).
fn serve_one(
    bound: BoundPort,
    cfg: &Config,
    pipeline: &Arc<Pipeline>,
    stop_tx: &tokio::sync::broadcast::Sender<()>,
    (threads, helpers): (usize, usize),
    actors: &actix::ArbiterHandle,
) -> Result<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>, StartError> {
    let BoundPort { port, listener } = bound;
    // Config holds TLS settings whenever a URL is https or unixs.
    let listening = actcd_front::Listening {
        insecure: port.insecure,
        tls: cfg.client_tls.clone().filter(|_| port.secure),
        traffic: port.traffic,
    };
    let address = listener.address();
    let mut stop = stop_tx.subscribe();
    let shutdown = async move {
        let _ = stop.recv().await;
    };
    let server = if threads == 0 {
        // Moved to the actors' runtime through its std form.
        let std_listener = match listener {
            actcd_front::ClientListener::Tcp(l) => l.into_std().map(StdListener::Tcp),
            actcd_front::ClientListener::Unix(l) => l.into_std().map(StdListener::Unix),
        }
        .map_err(|e| StartError::Listen {
            url: port.urls.join(","),
            reason: e.to_string(),
        })?;
        // The helper threads accept on clones of the same socket: whichever thread waits in
        // accept first takes the next connection, so a busy actors' thread leaves new ones to
        // the helpers.
        for _ in 0..helpers {
            let clone = std_listener
                .try_clone()
                .and_then(StdListener::into_tokio)
                .map_err(|e| StartError::Listen {
                    url: port.urls.join(","),
                    reason: e.to_string(),
                })?;
            let mut stop = stop_tx.subscribe();
            tokio::spawn(actcd_front::serve(
                clone,
                pipeline.clone(),
                listening.clone(),
                async move {
                    let _ = stop.recv().await;
                },
            ));
        }
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let p = pipeline.clone();
        actors.spawn(async move {
            if let Ok(l) = std_listener.into_tokio() {
                let _ = actcd_front::serve(l, p, listening, shutdown).await;
            }
            let _ = done_tx.send(());
        });
        tokio::spawn(async move {
            let _ = done_rx.await;
            Ok(())
        })
    } else {
        tokio::spawn(actcd_front::serve(
            listener,
            pipeline.clone(),
            listening,
            shutdown,
        ))
    };
    tracing::info!(address = %address, "ready to serve client requests");
    let traffic = port.traffic.name();
    if port.insecure {
        tracing::info!(
            address = %address,
            traffic,
            "serving client traffic insecurely; this is strongly discouraged!"
        );
    }
    if port.secure {
        tracing::info!(address = %address, traffic, "serving client traffic securely");
    }
    Ok(server)
}

/// A listener on its way to another runtime.
enum StdListener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl StdListener {
    /// Another handle on the same socket (it shares the socket's non-blocking mode).
    fn try_clone(&self) -> std::io::Result<Self> {
        match self {
            StdListener::Tcp(l) => l.try_clone().map(StdListener::Tcp),
            StdListener::Unix(l) => l.try_clone().map(StdListener::Unix),
        }
    }

    /// Registers the listener with the runtime this runs on.
    fn into_tokio(self) -> std::io::Result<actcd_front::ClientListener> {
        match self {
            StdListener::Tcp(l) => TcpListener::from_std(l).map(actcd_front::ClientListener::Tcp),
            StdListener::Unix(l) => {
                tokio::net::UnixListener::from_std(l).map(actcd_front::ClientListener::Unix)
            }
        }
    }
}

/// The unix socket files this member made (peer, client, metrics): removed when dropped, as etcd's
/// unix listener removes its file on close — at stop once the listeners are closed, and when a
/// later listener cannot be bound and the start fails (etcd closes the listeners it made).
#[derive(Default)]
pub(crate) struct SocketFiles(Vec<std::path::PathBuf>);

impl SocketFiles {
    /// etcd's `NewUnixListener`: a stale file at `path` is removed first, then the socket is
    /// bound there (on the current tokio runtime) and remembered.
    pub(crate) fn bind(&mut self, path: &str) -> std::io::Result<tokio::net::UnixListener> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        self.0.push(path.into());
        Ok(listener)
    }
}

impl Drop for SocketFiles {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The unix socket file of a metrics (or peer) URL, as etcd's `NewListenerWithOpts(u.Host, …)`
/// names it: the URL's host only (`unix://localhost:2381` is `./localhost:2381`; a path after
/// it is not part of the name, unlike a client URL's).
pub(crate) fn unix_socket_host(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("unix://")
        .or_else(|| url.strip_prefix("unixs://"))?;
    Some(rest.split(['/', '?', '#']).next().unwrap_or_default())
}

/// etcd's `ErrMissingClientTLSInfoForMetricsURL`.
const METRICS_URL_NEEDS_TLS: &str =
    "client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url";

/// `--listen-metrics-urls`: `/metrics`, `/health` and friends on a port of their own, served
/// from the start (etcd's `serveMetrics` does not wait for the member to be ready).
fn serve_metrics(
    cfg: &Config,
    pipeline: &Arc<Pipeline>,
    stop_tx: &tokio::sync::broadcast::Sender<()>,
    files: &mut SocketFiles,
) -> Result<(), StartError> {
    for url in cfg
        .flags
        .listen_metrics_urls
        .iter()
        .flat_map(|u| u.split(','))
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        let failed = |reason: String| StartError::Listen {
            url: url.to_string(),
            reason,
        };
        // etcd's createMetricsListener: a secure URL needs the client key pair (a unixs socket
        // is served plain all the same, as etcd's unix listener is).
        let secure = url.starts_with("https://") || url.starts_with("unixs://");
        let key_pair = [&cfg.flags.tls.cert_file, &cfg.flags.tls.key_file]
            .iter()
            .any(|f| f.as_ref().is_some_and(|p| !p.as_os_str().is_empty()));
        if secure && !key_pair && !cfg.flags.tls.auto_tls {
            return Err(StartError::Runtime(METRICS_URL_NEEDS_TLS.into()));
        }
        let (listener, addr) = match unix_socket_host(url) {
            Some(path) => (
                actcd_front::ClientListener::Unix(
                    files.bind(path).map_err(|e| failed(e.to_string()))?,
                ),
                path.to_string(),
            ),
            None => {
                let addr = actcd_front::parse_url(url)
                    .ok_or_else(|| failed("not an http://host:port URL".into()))?;
                let listener = crate::listen::listen(addr, cfg.flags.socket_reuse_port)
                    .map_err(|e| failed(e.to_string()))?;
                (actcd_front::ClientListener::Tcp(listener), addr.to_string())
            }
        };
        // etcd's createMetricsListener: an https URL is served with the client TLS settings
        // (Config builds them for it); a unixs socket is served plain, as etcd's is.
        let tls = cfg
            .client_tls
            .clone()
            .filter(|_| url.starts_with("https://"));
        if url.starts_with("https://") && tls.is_none() {
            return Err(StartError::Runtime(METRICS_URL_NEEDS_TLS.into()));
        }
        let mut stop = stop_tx.subscribe();
        tokio::spawn(actcd_front::serve_metrics(
            listener,
            pipeline.clone(),
            tls,
            async move {
                let _ = stop.recv().await;
            },
        ));
        tracing::info!(address = %addr, "serving metrics");
    }
    Ok(())
}

/// etcd's `publish`: a member proposes its name and client URLs through the log at every
/// start, so every member's Cluster service lists them (and `endpoint status --cluster` finds
/// it), and waits for the entry to be applied here — which also means this member knows a
/// leader. Retried until applied, as etcd retries each request timeout; a member no longer in
/// the cluster has nothing to publish.
async fn publish_attributes(
    pipeline: &Pipeline,
    member_id: u64,
    name: &str,
    client_urls: &[String],
) {
    use actcd_proto::actcdpb::{InternalRaftRequest, MemberAttributes};
    // Shorter than a client request's timeout: a restarted member's first proposal, forwarded
    // before its link to the leader is up, is lost, and the member would wait the whole
    // request timeout to be ready. Asking again sooner costs at most a repeated entry (the
    // attributes are set, not added).
    let attempt_timeout = pipeline
        .config
        .request_timeout
        .min((pipeline.config.election_timeout * 2).max(Duration::from_secs(1)));
    loop {
        if let Ok(members) = pipeline.members().await
            && !members.iter().any(|m| m.id == member_id)
        {
            tracing::warn!(%name, "not a member of the cluster; nothing to publish");
            return;
        }
        let req = InternalRaftRequest {
            member_attr_set: Some(MemberAttributes {
                member_id,
                name: name.to_string(),
                client_urls: client_urls.to_vec(),
            }),
            ..Default::default()
        };
        let attempt = tokio::time::timeout(attempt_timeout, pipeline.write_internal(req));
        match attempt.await {
            Ok(Ok(_)) => {
                tracing::info!(%name, "published local member to cluster through raft");
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "failed to publish local member to cluster through raft")
            }
            Err(_) => tracing::warn!(
                "failed to publish local member to cluster through raft: request timed out"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_front::Traffic;

    fn urls(s: &[&str]) -> Vec<String> {
        s.iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn client_urls_of_one_address_make_one_listener() {
        let ports = client_ports(
            &urls(&[
                "http://127.0.0.1:2379",
                "https://127.0.0.1:2379",
                "unix://localhost:2381",
                "unixs://localhost:2382",
            ]),
            &[],
        )
        .unwrap();
        let summary: Vec<_> = ports
            .iter()
            .map(|p| (p.address.as_str(), p.unix, p.insecure, p.secure, p.traffic))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("127.0.0.1:2379", false, true, true, Traffic::GrpcAndHttp),
                ("localhost:2381", true, true, false, Traffic::GrpcAndHttp),
                ("localhost:2382", true, false, true, Traffic::GrpcAndHttp),
            ]
        );
    }

    /// Each port's address, whether it serves plain and TLS, and its traffic.
    fn schemes_and_traffic(ports: &[ClientPort]) -> Vec<(&str, bool, bool, Traffic)> {
        ports
            .iter()
            .map(|p| (p.address.as_str(), p.insecure, p.secure, p.traffic))
            .collect()
    }

    #[test]
    fn http_urls_split_the_traffic() {
        let ports = client_ports(
            &urls(&["https://127.0.0.1:2379"]),
            &urls(&["http://127.0.0.1:2380", "https://127.0.0.1:2380"]),
        )
        .unwrap();
        let summary = schemes_and_traffic(&ports);
        assert_eq!(
            summary,
            vec![
                ("127.0.0.1:2379", false, true, Traffic::Grpc),
                ("127.0.0.1:2380", true, true, Traffic::Http),
            ]
        );
        assert_eq!(
            client_ports(
                &urls(&["http://127.0.0.1:2379"]),
                &urls(&["https://127.0.0.1:2379"])
            ),
            Err(
                "cannot bind both --client-listen-urls and --client-listen-http-urls on the same \
                 url https://127.0.0.1:2379"
                    .to_string()
            )
        );
    }

    /// etcd's `serveCtx.serve` in gRPC-only mode keeps the last server it set up: the TLS one.
    #[test]
    fn a_grpc_only_port_given_both_schemes_serves_tls_only() {
        let ports = client_ports(
            &urls(&["http://127.0.0.1:2379", "https://127.0.0.1:2379"]),
            &urls(&["http://127.0.0.1:2380", "https://127.0.0.1:2380"]),
        )
        .unwrap();
        let summary = schemes_and_traffic(&ports);
        assert_eq!(
            summary,
            vec![
                ("127.0.0.1:2379", false, true, Traffic::Grpc),
                ("127.0.0.1:2380", true, true, Traffic::Http),
            ]
        );
    }

    #[test]
    fn metrics_and_peer_sockets_are_named_by_the_url_host() {
        assert_eq!(
            unix_socket_host("unix://localhost:2381"),
            Some("localhost:2381")
        );
        assert_eq!(
            unix_socket_host("unixs://metrics.sock/ignored"),
            Some("metrics.sock")
        );
        assert_eq!(unix_socket_host("http://127.0.0.1:2381"), None);
    }

    #[test]
    fn client_urls_are_checked_with_etcds_words() {
        for (url, want) in [
            (
                "ftp://127.0.0.1:1",
                "URL scheme must be http, https, unix, or unixs: ftp://127.0.0.1:1",
            ),
            (
                "http://127.0.0.1",
                "URL address does not have the form \"host:port\": http://127.0.0.1",
            ),
            (
                "http://127.0.0.1:1/",
                "URL must not contain a path: http://127.0.0.1:1/",
            ),
            (
                "http://127.0.0.1:1/x",
                "URL must not contain a path: http://127.0.0.1:1/x",
            ),
        ] {
            assert_eq!(resolve_url(url), Err(want.to_string()), "{url}");
        }
        for (url, want) in [
            ("unix://localhost:2379", ("localhost:2379", false, true)),
            ("unixs:///run/etcd.sock", ("/run/etcd.sock", true, true)),
            ("unix://run/etcd.sock", ("run/etcd.sock", false, true)),
            ("https://[::1]:2379", ("[::1]:2379", true, false)),
        ] {
            assert_eq!(
                resolve_url(url),
                Ok((want.0.to_string(), want.1, want.2)),
                "{url}"
            );
        }
    }
}
