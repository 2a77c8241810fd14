//! What a learner serves: etcd lets a learner answer only Status and serializable Ranges (and
//! stream only snapshots); everything else is refused with `etcdserver: rpc not supported for
//! learner`, so clients move to a voting member. The gate sits in front of every service as a
//! tower layer (it needs the method's path, which tonic's interceptors don't see); the Range
//! handler refuses linearizable reads itself.

use std::task::{Context, Poll};

use actcd_types::EtcdError;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;

/// Whether this member is a learner, as the raft node last said.
pub type LearnerFlag = watch::Receiver<bool>;

/// The methods a learner serves (the Range handler checks `serializable` itself).
pub fn allowed_for_learner(path: &str) -> bool {
    matches!(
        path,
        "/etcdserverpb.Maintenance/Status"
            | "/etcdserverpb.KV/Range"
            | "/etcdserverpb.Maintenance/Snapshot"
    )
}

#[derive(Clone)]
pub struct LearnerGate {
    pub learner: LearnerFlag,
}

impl<S> tower_layer::Layer<S> for LearnerGate {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner,
            learner: self.learner.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Gated<S> {
    inner: S,
    learner: LearnerFlag,
}

impl<S, B> tower_service::Service<http::Request<B>> for Gated<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if *self.learner.borrow() && !allowed_for_learner(req.uri().path()) {
            let refusal = EtcdError::NotSupportedForLearner.to_status().into_http();
            return futures::future::ready(Ok(refusal)).boxed();
        }
        self.inner.call(req).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learner_serves_what_etcd_lets_it() {
        for ok in [
            "/etcdserverpb.Maintenance/Status",
            "/etcdserverpb.KV/Range",
            "/etcdserverpb.Maintenance/Snapshot",
        ] {
            assert!(allowed_for_learner(ok), "{ok}");
        }
        for refused in [
            "/etcdserverpb.KV/Put",
            "/etcdserverpb.KV/Txn",
            "/etcdserverpb.Watch/Watch",
            "/etcdserverpb.Lease/LeaseKeepAlive",
            "/etcdserverpb.Cluster/MemberList",
            "/etcdserverpb.Auth/Authenticate",
        ] {
            assert!(!allowed_for_learner(refused), "{refused}");
        }
    }
}
