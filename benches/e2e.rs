//! End to end: gRPC Put and Range against an in-process member (every actor, a real WAL with
//! fsync, LMDB), through the same tonic client a user's program would use. The client shares
//! the machine's cores with the server, as in `actcd-bench`; compare the figures with
//! `benches/compare-etcd.sh`, not with the per-actor benches, which leave out the network.

#[path = "common/mod.rs"]
mod common;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use actcd::config::{Config, Flags};
use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::{PutRequest, RangeRequest};
use clap::Parser;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tonic::transport::Channel;

/// Concurrent clients in the "many" cases: enough to fill a Ready with proposals.
const CLIENTS: usize = 64;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts a member on its own thread; dropping the sender stops it.
fn start_member(dir: &std::path::Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let (client, peer) = (free_port(), free_port());
    let client_url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let flags = Flags::parse_from([
        "actcd",
        "--data-dir",
        &dir.display().to_string(),
        "--listen-client-urls",
        &client_url,
        "--advertise-client-urls",
        &client_url,
        "--listen-peer-urls",
        &peer_url,
        "--initial-advertise-peer-urls",
        &peer_url,
        "--log-level",
        "warn",
    ]);
    let cfg = Config::try_from(flags).expect("config");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let stop = async move {
            let _ = stop_rx.await;
        };
        if let Err(e) = actcd::node::run_until(cfg, stop) {
            eprintln!("member failed: {e}");
        }
    });
    (client_url, stop_tx)
}

async fn connect(url: &str) -> KvClient<Channel> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(ch) = Channel::from_shared(url.to_string())
            .expect("url")
            .connect()
            .await
        {
            let mut kv = KvClient::new(ch);
            // Ready once a write goes through (a leader is elected).
            if kv.put(put_req(0)).await.is_ok() {
                return kv;
            }
        }
        assert!(Instant::now() < deadline, "member did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn put_req(i: u64) -> PutRequest {
    PutRequest {
        key: common::key(i % 10_000),
        value: vec![b'v'; common::VALUE_LEN],
        ..Default::default()
    }
}

/// Runs `iters` requests split over `clients` concurrent callers; returns the wall time.
async fn run<F, Fut>(kv: &KvClient<Channel>, clients: usize, iters: u64, op: F) -> Duration
where
    F: Fn(KvClient<Channel>, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let per = iters.div_ceil(clients as u64);
    let tasks: Vec<_> = (0..clients as u64)
        .map(|c| {
            let kv = kv.clone();
            let op = op.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    op(kv.clone(), c * per + i).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("client task");
    }
    start.elapsed()
}

fn bench_e2e(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (url, stop) = start_member(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let kv = rt.block_on(connect(&url));
    // 10,000 keys to range over.
    rt.block_on(run(&kv, CLIENTS, 10_000, |mut kv, i| async move {
        kv.put(put_req(i)).await.expect("put");
    }));

    let mut group = c.benchmark_group("e2e/put");
    group.throughput(Throughput::Elements(1));
    for clients in [1, CLIENTS] {
        group.bench_function(BenchmarkId::new("clients", clients), |b| {
            b.iter_custom(|iters| {
                rt.block_on(run(&kv, clients, iters, |mut kv, i| async move {
                    kv.put(put_req(i)).await.expect("put");
                }))
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("e2e/range");
    group.throughput(Throughput::Elements(1));
    for (name, serializable) in [("linearizable", false), ("serializable", true)] {
        group.bench_function(BenchmarkId::new(name, CLIENTS), |b| {
            b.iter_custom(|iters| {
                rt.block_on(run(&kv, CLIENTS, iters, move |mut kv, i| async move {
                    let r = kv
                        .range(RangeRequest {
                            key: common::key(i % 10_000),
                            serializable,
                            ..Default::default()
                        })
                        .await
                        .expect("range");
                    assert_eq!(r.into_inner().kvs.len(), 1);
                }))
            })
        });
    }
    group.finish();
    drop(stop);
}

criterion_group! {
    name = benches;
    config = common::criterion();
    targets = bench_e2e
}
criterion_main!(benches);
