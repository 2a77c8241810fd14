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
use crate::wiring::{front_threads, now_ms};

/// Serves the client API on the tokio runtime until `stop` resolves.
pub(crate) fn serve_clients(
    cfg: &Config,
    (routes, initial_check): (PipelineRoutes, actix::Recipient<InitialCheck>),
    stop: impl std::future::Future<Output = ()> + Send + 'static,
    actors: actix::ArbiterHandle,
) -> Result<(), StartError> {
    let threads = front_threads();
    let mut builder = if threads == 0 {
        // Only the signal handler and the shutdown wait run here.
        tokio::runtime::Builder::new_current_thread()
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
        let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
        // Bound now, so a taken port fails the start at once; accepted only once ready.
        let client_listeners = bind_clients(cfg)?;
        serve_metrics(cfg, &pipeline, &stop_tx)?;
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
            for (url, listener) in client_listeners {
                servers.push(serve_one(
                    &url, listener, cfg, &pipeline, &stop_tx, threads, &actors,
                )?);
            }
            stop.await;
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

/// Binds every `--listen-client-urls` address (nothing is accepted yet).
fn bind_clients(cfg: &Config) -> Result<Vec<(String, TcpListener)>, StartError> {
    cfg.client_urls
        .iter()
        .map(|url| {
            let addr = actcd_front::parse_url(url).ok_or_else(|| StartError::Listen {
                url: url.clone(),
                reason: "not an http(s)://host:port URL".into(),
            })?;
            let listener =
                crate::listen::listen(addr, cfg.flags.socket_reuse_port).map_err(|e| {
                    StartError::Listen {
                        url: url.clone(),
                        reason: e.to_string(),
                    }
                })?;
            Ok((url.clone(), listener))
        })
        .collect()
}

/// Starts accepting clients on one bound listener: on the front's runtime, or on the actors'
/// thread when the front shares it (`front_threads() == 0`).
fn serve_one(
    url: &str,
    listener: TcpListener,
    cfg: &Config,
    pipeline: &Arc<Pipeline>,
    stop_tx: &tokio::sync::broadcast::Sender<()>,
    threads: usize,
    actors: &actix::ArbiterHandle,
) -> Result<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>, StartError> {
    // Config holds TLS settings whenever a URL is https.
    let tls = if url.starts_with("https://") {
        cfg.client_tls.clone()
    } else {
        None
    };
    let secure = tls.is_some();
    let addr = listener.local_addr().map_err(|e| StartError::Listen {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    let mut stop = stop_tx.subscribe();
    let shutdown = async move {
        let _ = stop.recv().await;
    };
    let server = if threads == 0 {
        let std_listener = listener.into_std().map_err(|e| StartError::Listen {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let p = pipeline.clone();
        actors.spawn(async move {
            if let Ok(l) = TcpListener::from_std(std_listener) {
                let _ = actcd_front::serve(l, p, tls, shutdown).await;
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
            tls,
            shutdown,
        ))
    };
    tracing::info!(address = %addr, "ready to serve client requests");
    if secure {
        tracing::info!(address = %addr, "serving client traffic securely");
    } else {
        tracing::info!(address = %addr, "serving client traffic insecurely");
    }
    Ok(server)
}

/// `--listen-metrics-urls`: `/metrics`, `/health` and friends on a port of their own, served
/// from the start (etcd's `serveMetrics` does not wait for the member to be ready).
fn serve_metrics(
    cfg: &Config,
    pipeline: &Arc<Pipeline>,
    stop_tx: &tokio::sync::broadcast::Sender<()>,
) -> Result<(), StartError> {
    for url in cfg
        .flags
        .listen_metrics_urls
        .iter()
        .flat_map(|u| u.split(','))
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        let addr = actcd_front::parse_url(url).ok_or_else(|| StartError::Listen {
            url: url.to_string(),
            reason: "not an http://host:port URL".into(),
        })?;
        let listener = crate::listen::listen(addr, cfg.flags.socket_reuse_port).map_err(|e| {
            StartError::Listen {
                url: url.to_string(),
                reason: e.to_string(),
            }
        })?;
        let mut stop = stop_tx.subscribe();
        tokio::spawn(actcd_front::serve_metrics(
            listener,
            pipeline.clone(),
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
        let attempt = tokio::time::timeout(
            pipeline.config.request_timeout,
            pipeline.write_internal(req),
        );
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
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
