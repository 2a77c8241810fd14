//! A storage failure is fatal: the member stops and exits non-zero (etcd exits 1), and a restart
//! with room again serves every write acknowledged before the failure (the WAL replays it).
//!
//! The failure is real, not injected: the server runs under a file-size limit (`ulimit -f`,
//! with SIGXFSZ ignored so a write past it fails with EFBIG instead of killing the process).
//! The WAL's segment is preallocated to 64 MiB when it is created, so the member is created
//! without the limit first; under the limit the WAL then only writes inside its preallocated
//! segment, far below the limit. The backend's data file grows twice as fast as the WAL: each
//! value is a little over one 4 KiB page, so LMDB stores it in two overflow pages while the WAL
//! appends it once. The backend's file reaches the limit first, and its commit fails.

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use etcd_client::{GetOptions, Txn, TxnOp};

use super::Server;

/// The file-size limit in 512-byte blocks (dash's `ulimit -f` unit; 1024 in bash, which only
/// doubles the limit): 16 MiB, far above the backend's size at start and below the WAL's
/// preallocated segment.
const LIMIT_BLOCKS: u64 = 32 * 1024;
/// Just over one LMDB page once encoded as a KeyValue: two overflow pages in the backend.
const VALUE_BYTES: usize = 4200;
const PUTS_PER_TXN: usize = 16;
/// More than the limit can take many times over.
const MAX_TXNS: usize = 600;

fn value(key: &str) -> Vec<u8> {
    key.bytes().cycle().take(VALUE_BYTES).collect()
}

#[tokio::test]
async fn a_storage_failure_exits_non_zero_and_a_restart_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_path = dir.path().join("actcd.log");
    let mut srv = Server::start(&data);
    srv.client().await.put("before", "v", None).await.unwrap();
    let mut first = srv.child.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(first.wait().unwrap().success(), "SIGTERM exits 0");

    // The same member under the limit, its log kept.
    let actcd = srv.command();
    let limited = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {LIMIT_BLOCKS}; exec \"$0\" \"$@\""
        ))
        .arg(actcd.get_program())
        .args(actcd.get_args())
        .envs(actcd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdout(Stdio::null())
        .stderr(File::create(&log_path).unwrap())
        .spawn()
        .expect("start actcd under a file-size limit");
    srv.child = Some(limited);
    let mut c = srv.client().await;
    let mut acked = vec!["before".to_string()];
    let mut failed = false;
    for t in 0..MAX_TXNS {
        let keys: Vec<String> = (0..PUTS_PER_TXN)
            .map(|j| format!("k/{t:05}/{j:02}"))
            .collect();
        let ops: Vec<TxnOp> = keys
            .iter()
            .map(|k| TxnOp::put(k.as_str(), value(k), None))
            .collect();
        match c.txn(Txn::new().and_then(ops)).await {
            Ok(_) => acked.extend(keys),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the backend never hit the file-size limit");

    let child = srv.child.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the member kept running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    srv.child = None;
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(status.code(), Some(1), "exits 1 as etcd does; log:\n{log}");
    assert!(
        log.contains("backend commit failed") && log.contains("fatal error; shutting"),
        "the backend's commit failed and the supervisor stopped the member; log:\n{log}"
    );
    assert!(
        !log.contains("WAL append failed"),
        "not the WAL; log:\n{log}"
    );
    assert_eq!(
        log.matches("fatal error; shutting").count(),
        1,
        "logged once"
    );

    // Room again: everything acknowledged is there.
    srv.spawn();
    let mut c = srv.client().await;
    assert_eq!(c.get("before", None).await.unwrap().kvs()[0].value(), b"v");
    let txns = (acked.len() - 1) / PUTS_PER_TXN;
    assert!(txns > 0, "some writes were acknowledged before the failure");
    for t in 0..txns {
        let prefix = format!("k/{t:05}/");
        let got = c
            .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        assert_eq!(got.kvs().len(), PUTS_PER_TXN, "{prefix}");
        for kv in got.kvs() {
            assert_eq!(kv.value(), value(kv.key_str().unwrap()), "{prefix}");
        }
    }
    c.put("after", "v", None).await.unwrap();
}
