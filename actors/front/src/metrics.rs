//! The tower layer in front of every gRPC service: it refuses on a learner what etcd's
//! learners refuse (`learner.rs`), accounts for every call as go-grpc-prometheus and etcd do
//! (the counters, the byte-counting body and grpc-go's refusal words are `actcd-metrics`'
//! `requests`, `counted` and `grpcgo`, re-exported here where the front names them), keeps
//! the call's client deadline for the task that serves it (`client_deadline`), and warns,
//! naming the client, of a unary request slower than etcd's 100 ms "took too long" threshold.
//! The JSON gateway's calls are counted too (`gateway.rs`), as etcd's gateway calls its gRPC
//! server. Front-local counters; `/metrics` renders them.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use actcd_metrics::counted::{CountedBody, Side};
use actcd_metrics::grpcgo::as_grpc_go_answers;
use actcd_metrics::requests::{code_name, never_slow};
use futures::FutureExt;
use futures::future::BoxFuture;

pub use actcd_metrics::counted::Counted;
pub use actcd_metrics::counters::FrontCounters;
pub use actcd_metrics::requests::{RequestStats, cancel_code};

/// etcd's warning threshold for a slow request.
pub const SLOW: Duration = Duration::from_millis(100);

/// The layer: every gRPC call through it is accounted into `stats`, and refused on a learner
/// when etcd's learners refuse it.
#[derive(Clone)]
pub struct Accounting {
    pub stats: Arc<RequestStats>,
    /// Whether this member is a learner.
    pub learner: crate::learner::LearnerFlag,
}

impl<S> tower_layer::Layer<S> for Accounting {
    type Service = Accounted<S>;

    fn layer(&self, inner: S) -> Accounted<S> {
        Accounted {
            inner,
            stats: self.stats.clone(),
            learner: self.learner.clone(),
        }
    }
}

/// A gRPC service under [`Accounting`].
#[derive(Clone)]
pub struct Accounted<S> {
    inner: S,
    stats: Arc<RequestStats>,
    learner: crate::learner::LearnerFlag,
}

impl<S, B> tower_service::Service<http::Request<B>> for Accounted<S>
where
    S: tower_service::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
        >,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: hyper::body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let path = req.uri().path().to_string();
        let remote = req
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(|c| c.remote_addr());
        let stats = self.stats.clone();
        let started = Instant::now();
        stats.started(
            &path,
            req.headers()
                .get("client-api-version")
                .and_then(|v| v.to_str().ok()),
        );
        if *self.learner.borrow() && !crate::learner::allowed_for_learner(&path) {
            let refusal = actcd_types::EtcdError::NotSupportedForLearner.to_status();
            stats.record(&path, refusal.code(), started.elapsed());
            return futures::future::ready(Ok(refusal.into_http())).boxed();
        }
        let deadline = grpc_timeout(req.headers()).map(|t| tokio::time::Instant::now() + t);
        let req = req.map(|body| {
            tonic::body::Body::new(CountedBody::new(
                body,
                stats.clone(),
                path.clone(),
                Side::Received,
            ))
        });
        let answer = CLIENT_DEADLINE.scope(deadline, self.inner.call(req));
        async move {
            let mut res = answer.await;
            let took = started.elapsed();
            if let Ok(resp) = &mut res {
                as_grpc_go_answers(&path, resp.headers_mut());
                // A failed call is a trailers-only answer: its status is in the headers.
                let status = resp
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .map(tonic::Code::from);
                // A stream that opened is handled when it ends.
                let open_stream = status.is_none() && stats.is_streaming(&path);
                let code = status.unwrap_or(tonic::Code::Ok);
                let side = if open_stream {
                    Side::SentUntilEnd { started }
                } else {
                    stats.record(&path, code, took);
                    Side::Sent
                };
                let body = std::mem::take(resp.body_mut());
                *resp.body_mut() = tonic::body::Body::new(CountedBody::new(
                    body,
                    stats.clone(),
                    path.clone(),
                    side,
                ));
                if took > SLOW && !never_slow(&path) {
                    tracing::warn!(
                        method = %path,
                        remote = ?remote,
                        took = ?took,
                        code = code_name(code),
                        "request took too long"
                    );
                }
            }
            res
        }
        .boxed()
    }
}

tokio::task_local! {
    /// The deadline of the gRPC call being served, from its `grpc-timeout` header.
    static CLIENT_DEADLINE: Option<tokio::time::Instant>;
}

/// When the client of the gRPC call this task serves stops waiting, if it said (etcd's clients
/// send their context deadline as `grpc-timeout`): a write that must wait for a leader is
/// dropped then instead of committing after its client saw it fail.
pub(crate) fn client_deadline() -> Option<tokio::time::Instant> {
    CLIENT_DEADLINE.try_with(|d| *d).ok().flatten()
}

/// gRPC's `grpc-timeout` header: digits and a unit (H, M, S, m, u, n).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<std::time::Duration> {
    let v = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => std::time::Duration::from_secs(n.checked_mul(3600)?),
        "M" => std::time::Duration::from_secs(n.checked_mul(60)?),
        "S" => std::time::Duration::from_secs(n),
        "m" => std::time::Duration::from_millis(n),
        "u" => std::time::Duration::from_micros(n),
        "n" => std::time::Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "metrics_deadline_tests.rs"]
mod deadline_tests;
