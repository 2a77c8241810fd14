//! A big unary Range: its answer is the paginated one, and (measured, Linux only, with
//! `ACTCD_MEM_TESTS=1`) the server holds about one copy of it at its peak.
//!
//! The encoded path (`actcd-mvcc`'s `encode.rs`, the front's `range_route.rs`) answers a
//! Range in the default order without filters; a Range with a filter that keeps everything
//! (`min_mod_revision = 1`) is still answered by the message path, which decodes every record
//! and has tonic's prost encoder write the response into a growing buffer. So one server
//! measures both: the message path is what every Range cost before. Keys-only Ranges are
//! measured the same way (encoded from the index, or through the message path).

use std::time::Duration;

use actcd_proto::etcdserverpb::kv_client::KvClient;
use actcd_proto::etcdserverpb::request_op::Request as Op;
use actcd_proto::etcdserverpb::{
    DeleteRangeRequest, LeaseGrantRequest, PutRequest, RangeRequest, RangeResponse, RequestOp,
    TxnRequest, lease_client::LeaseClient,
};
use prost::Message;
use tonic::transport::Channel;

use crate::Server;

async fn kv(srv: &Server) -> KvClient<Channel> {
    srv.client().await;
    KvClient::connect(format!("http://{}", srv.endpoint()))
        .await
        .unwrap()
        .max_decoding_message_size(usize::MAX)
}

fn key(i: usize) -> Vec<u8> {
    format!("/registry/pods/default/pod-{i:07}").into_bytes()
}

/// Puts keys `0..n` with `value_len`-byte values, 128 to a txn, `parallel` txns at a time;
/// every `lease_every`th key (if any) with `lease`.
async fn load(kv: &KvClient<Channel>, n: usize, value_len: usize, lease: Option<(usize, i64)>) {
    let batches: Vec<Vec<usize>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(128)
        .map(<[usize]>::to_vec)
        .collect();
    let parallel = 8;
    let mut tasks = Vec::new();
    for part in 0..parallel {
        let mut kv = kv.clone();
        let mine: Vec<Vec<usize>> = batches
            .iter()
            .skip(part)
            .step_by(parallel)
            .cloned()
            .collect();
        tasks.push(tokio::spawn(async move {
            for batch in mine {
                let success = batch
                    .iter()
                    .map(|&i| RequestOp {
                        request: Some(Op::RequestPut(PutRequest {
                            key: key(i),
                            value: vec![b'a' + (i % 26) as u8; value_len],
                            lease: match lease {
                                Some((every, id)) if i % every == 0 => id,
                                _ => 0,
                            },
                            ..Default::default()
                        })),
                    })
                    .collect();
                kv.txn(TxnRequest {
                    success,
                    ..Default::default()
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn everything() -> RangeRequest {
    RangeRequest {
        key: b"/registry/".to_vec(),
        range_end: b"/registry0".to_vec(),
        ..Default::default()
    }
}

/// The whole of `req` read in pages of `page` keys (each page at the first page's revision).
async fn paginated(kv: &mut KvClient<Channel>, req: &RangeRequest, page: i64) -> RangeResponse {
    let mut all = RangeResponse::default();
    let mut next = req.key.clone();
    loop {
        let resp = kv
            .range(RangeRequest {
                key: next.clone(),
                limit: page,
                revision: match (req.revision, &all.header) {
                    (0, Some(h)) => h.revision,
                    (r, _) => r,
                },
                ..req.clone()
            })
            .await
            .unwrap()
            .into_inner();
        if all.header.is_none() {
            all.header = resp.header;
            all.count = resp.count;
        }
        all.kvs.extend(resp.kvs.iter().cloned());
        match resp.kvs.last() {
            Some(last) if resp.more => {
                next = last.key.clone();
                next.push(0);
            }
            _ => return all,
        }
    }
}

/// The same key-values, or where they first differ (not all of them: they are big).
fn same_kvs(got: &RangeResponse, want: &RangeResponse, what: &str) {
    let first = got.kvs.iter().zip(&want.kvs).position(|(a, b)| a != b);
    assert!(
        first.is_none() && got.kvs.len() == want.kvs.len(),
        "{what}: {} against {} key-values, first difference at {first:?}",
        got.kvs.len(),
        want.kvs.len()
    );
}

#[tokio::test]
async fn a_big_unary_range_is_the_paginated_one() {
    let dir = tempfile::tempdir().unwrap();
    let srv = Server::start(dir.path());
    let mut kv = kv(&srv).await;
    let channel = Channel::from_shared(format!("http://{}", srv.endpoint()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let lease = LeaseClient::new(channel)
        .lease_grant(LeaseGrantRequest { ttl: 600, id: 0 })
        .await
        .unwrap()
        .into_inner()
        .id;
    // More keys than the store reads from its index under one lock hold (4096).
    let n = 10_000;
    load(&kv, n, 200, Some((7, lease))).await;
    let before_changes = kv.range(everything()).await.unwrap().into_inner();
    // Overwrites, and deletes that leave holes, after the revision read above.
    kv.delete_range(DeleteRangeRequest {
        key: key(5000),
        range_end: key(5100),
        ..Default::default()
    })
    .await
    .unwrap();
    load(&kv, 300, 10, None).await;

    let at_old = RangeRequest {
        revision: before_changes.header.as_ref().unwrap().revision,
        ..everything()
    };
    for req in [everything(), at_old] {
        let unary = kv.range(req.clone()).await.unwrap().into_inner();
        let pages = paginated(&mut kv, &req, 999).await;
        assert_eq!(unary.kvs.len(), unary.count as usize);
        assert!(!unary.more);
        assert_eq!(unary.count, pages.count);
        same_kvs(&unary, &pages, "paginated");
        // The message path (a filter that keeps everything) answers the same.
        let filtered = kv
            .range(RangeRequest {
                min_mod_revision: 1,
                ..req.clone()
            })
            .await
            .unwrap()
            .into_inner();
        same_kvs(&unary, &filtered, "message path");
        // A limit: more, and the count of the whole range.
        let limited = kv
            .range(RangeRequest {
                limit: 5000,
                ..req.clone()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(limited.more);
        assert_eq!(limited.count, unary.count);
        assert!(limited.kvs[..] == unary.kvs[..5000], "limited");
    }
    assert_eq!(before_changes.count, n as i64);
    assert!(before_changes.kvs.iter().any(|kv| kv.lease == lease));
}

/// `VmRSS` and `VmHWM` of `pid`, in bytes.
#[cfg(target_os = "linux")]
pub(crate) fn rss_and_peak(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap()
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The server's peak RSS rise during one `req`, read after a restart and a paginated read of
/// everything (so the records' pages are mapped before, as they are on a server in use), and
/// the answer's encoded size.
#[cfg(target_os = "linux")]
async fn peak_rise(srv: &mut Server, req: RangeRequest) -> (u64, usize) {
    srv.restart();
    let mut kv = kv(srv).await;
    paginated(&mut kv, &everything(), 10_000).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = srv.child.as_ref().unwrap().id();
    // Resets VmHWM to the current RSS.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let (before, _) = rss_and_peak(pid);
    let resp = kv.range(req).await.unwrap().into_inner();
    let (_, peak) = rss_and_peak(pid);
    (peak.saturating_sub(before), resp.encoded_len())
}

/// A keys-only answer is small beside the server (8.7 MiB here), so a few MiB of allocator
/// and runtime noise weigh more in its ratio than in the full answer's. (Measured in debug:
/// 0.47x encoded, where memory the paginated read freed is reused before it is given back;
/// 7.1x through the message path, which keys-only Ranges took before.)
#[cfg(target_os = "linux")]
const KEYS_ONLY_BOUND: f64 = 1.5;

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_unary_range_holds_about_one_copy_of_its_answer() {
    if std::env::var_os("ACTCD_MEM_TESTS").is_none() {
        eprintln!("skipped: a memory measurement, run with ACTCD_MEM_TESTS=1");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut srv = Server::start(dir.path());
    load(&kv(&srv).await, 200_000, 256, None).await;

    let (encoded_rise, size) = peak_rise(&mut srv, everything()).await;
    let (message_rise, _) = peak_rise(
        &mut srv,
        RangeRequest {
            min_mod_revision: 1,
            ..everything()
        },
    )
    .await;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "200k keys x 256 B, answer {:.1} MiB: peak RSS rise {:.1} MiB encoded ({:.2}x), \
         {:.1} MiB through the message path ({:.2}x)",
        mib(size as u64),
        mib(encoded_rise),
        encoded_rise as f64 / size as f64,
        mib(message_rise),
        message_rise as f64 / size as f64,
    );
    assert!(
        encoded_rise as f64 <= 1.3 * size as f64,
        "peak rise {encoded_rise} B for an answer of {size} B"
    );

    // Keys only: written from the index straight into the response buffer.
    let keys_only = RangeRequest {
        keys_only: true,
        ..everything()
    };
    let (keys_rise, keys_size) = peak_rise(&mut srv, keys_only.clone()).await;
    let (keys_message_rise, _) = peak_rise(
        &mut srv,
        RangeRequest {
            min_mod_revision: 1,
            ..keys_only
        },
    )
    .await;
    eprintln!(
        "keys only, answer {:.1} MiB: peak RSS rise {:.1} MiB encoded ({:.2}x), {:.1} MiB \
         through the message path ({:.2}x)",
        mib(keys_size as u64),
        mib(keys_rise),
        keys_rise as f64 / keys_size as f64,
        mib(keys_message_rise),
        keys_message_rise as f64 / keys_size as f64,
    );
    assert!(
        keys_rise as f64 <= KEYS_ONLY_BOUND * keys_size as f64,
        "keys-only peak rise {keys_rise} B for an answer of {keys_size} B"
    );
}
