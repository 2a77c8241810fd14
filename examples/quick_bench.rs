//! A quick load client for comparing actcd with etcd on one machine until `actcd-bench` exists:
//! `cargo run --release --example quick_bench -- <endpoint> <put|range|range-s|range1000> <clients> <conns> <total>`.
//! Prints requests/second and latency percentiles. Works unchanged against etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let endpoint = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:2379".into());
    let op = args.get(2).cloned().unwrap_or_else(|| "put".into());
    let clients: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
    let conns: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(10);
    let total: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(20_000);

    let mut pool = Vec::new();
    for _ in 0..conns.max(1) {
        pool.push(Client::connect([endpoint.clone()], None).await?);
    }
    pool[0].put("bench-key", vec![b'v'; 256], None).await?;
    if op == "range1000" {
        for i in 0..1000 {
            pool[0]
                .put(format!("p/{i:04}"), vec![b'v'; 256], None)
                .await?;
        }
    }
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut client = pool[c % pool.len()].clone();
        let next = next.clone();
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                let res = match op.as_str() {
                    "put" => client
                        .put(format!("k{:08}", i % 100_000), vec![b'v'; 256], None)
                        .await
                        .map(|_| ()),
                    "range-s" => client
                        .get("bench-key", Some(GetOptions::new().with_serializable()))
                        .await
                        .map(|_| ()),
                    "range1000" => client
                        .get("p/", Some(GetOptions::new().with_prefix()))
                        .await
                        .map(|_| ()),
                    _ => client.get("bench-key", None).await.map(|_| ()),
                };
                res.expect("request failed");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat: Vec<Duration> = Vec::new();
    for t in tasks {
        lat.extend(t.await?);
    }
    let elapsed = start.elapsed();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "{op}: {} reqs in {:.2}s = {:.0} req/s; p50 {:.2}ms p99 {:.2}ms",
        lat.len(),
        elapsed.as_secs_f64(),
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3
    );
    Ok(())
}
