//! A byte flipped inside a stored value, as an operator with a hex editor (or a failing disk)
//! would: the member never serves the wrong value, names the damaged record in its log, and
//! raises the CORRUPT alarm for itself. Found when a client reads it, and by the background
//! scrub when nobody does. (An old-format data dir opening and reading right is
//! `upgrade.rs`: its fixtures were written before records carried checksums.)

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use etcd_client::{AlarmAction, AlarmType, Client};

use super::*;

/// Flips one bit inside every copy of `needle` in `file` (LMDB's free pages may hold stale
/// copies: the live one is among them); returns how many were flipped.
fn flip_in_file(file: &Path, needle: &[u8]) -> usize {
    let mut data = std::fs::read(file).unwrap();
    let mut flipped = 0;
    let mut at = 0;
    while let Some(i) = data[at..].windows(needle.len()).position(|w| w == needle) {
        data[at + i + needle.len() / 2] ^= 0x04;
        flipped += 1;
        at += i + needle.len();
    }
    // In place, not a new file: a running member reads the file through its mapping.
    use std::io::{Seek, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    f.seek(std::io::SeekFrom::Start(0)).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
    flipped
}

fn data_file(dir: &Path) -> PathBuf {
    dir.join("member/snap/data.mdb")
}

/// Spawns `srv` again with its log (warnings and errors) going to `log`.
fn spawn_logged(srv: &mut Server, log: &Path) {
    let child = srv
        .command()
        .stdout(Stdio::null())
        .stderr(File::create(log).unwrap())
        .spawn()
        .expect("start actcd");
    srv.child = Some(child);
}

/// A client once the member answers anything at all (a member that found corruption may
/// refuse reads, so `Server::client`'s probe can't be used).
async fn connect(srv: &Server) -> Client {
    for _ in 0..400 {
        if let Ok(mut c) = Client::connect([srv.endpoint()], None).await
            && c.status().await.is_ok()
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("actcd on {} never answered", srv.endpoint());
}

async fn corrupt_alarms(c: &mut Client) -> Vec<u64> {
    c.alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .unwrap()
        .alarms()
        .iter()
        .filter(|a| a.alarm() == AlarmType::Corrupt)
        .map(|a| a.member_id())
        .collect()
}

/// Waits (up to 10 s) for CORRUPT to be raised for `member`.
async fn wait_for_corrupt(c: &mut Client, member: u64) {
    for _ in 0..200 {
        if corrupt_alarms(c).await.contains(&member) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("CORRUPT never raised for {member:x}");
}

/// The log lines naming the damaged record.
fn damage_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("damaged record"))
        .map(str::to_string)
        .collect()
}

/// `etcdctl alarm list` as etcd's operators run it, where etcdctl is installed.
fn etcdctl_alarm_list(endpoint: &str) -> Option<String> {
    let bin = std::env::var("ETCDCTL").unwrap_or_else(|_| "etcdctl".to_string());
    let out = Command::new(&bin)
        .args(["--endpoints", endpoint, "alarm", "list"])
        .env("ETCDCTL_API", "3")
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test]
async fn a_flipped_byte_in_a_stored_value_is_never_served_and_raises_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("actcd.log");
    let mut srv = Server::start(&data);
    let mut c = srv.client().await;
    const VALUE: &str = "a recognisable value that appears once: 7f3c9e1d";
    c.put("foo", "the older value", None).await.unwrap();
    let put = c.put("foo", VALUE, None).await.unwrap();
    let (member, rev) = (
        put.header().unwrap().member_id(),
        put.header().unwrap().revision(),
    );
    c.put("other", "fine", None).await.unwrap();
    drop(c);
    srv.stop();

    assert!(flip_in_file(&data_file(&data), VALUE.as_bytes()) >= 1);
    spawn_logged(&mut srv, &log);
    let mut c = connect(&srv).await;

    // Neither the damaged value nor the older one: etcd's corrupt error.
    let err = c.get("foo", None).await.unwrap_err();
    assert_eq!(
        code_and_message(err),
        (tonic::Code::DataLoss, "etcdserver: corrupt cluster".into())
    );
    let err = c
        .get("f", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .unwrap_err();
    assert_eq!(code_and_message(err).0, tonic::Code::DataLoss);

    wait_for_corrupt(&mut c, member).await;
    let lines = damage_lines(&log);
    let want_rev = format!("revision={rev}_0");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&want_rev) && l.contains("key=\"foo\"")),
        "the log names the key and revision: {lines:#?}"
    );
    if let Some(listed) = etcdctl_alarm_list(&srv.endpoint()) {
        assert_eq!(listed, format!("memberID:{member} alarm:CORRUPT \n"));
    } else {
        eprintln!("note: etcdctl not found; skipping the etcdctl alarm list check");
    }
}

#[tokio::test]
async fn the_scrub_finds_a_damaged_record_nobody_reads() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log = dir.path().join("actcd.log");
    let mut srv = Server::start_with(&data, &["--experimental-scrub-interval=1s"]);
    srv.stop();
    spawn_logged(&mut srv, &log);
    let mut c = srv.client().await;
    const VALUE: &str = "cold value nobody reads: 0b5e2a77c1";
    let put = c.put("cold", VALUE, None).await.unwrap();
    let (member, rev) = (
        put.header().unwrap().member_id(),
        put.header().unwrap().revision(),
    );
    c.put("warm", "read all the time", None).await.unwrap();
    // The record reaches the file at the backend's next commit (every 100 ms).
    let file = data_file(&data);
    for _ in 0..100 {
        let on_disk = std::fs::read(&file).unwrap();
        if on_disk.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Damaged under the running member; no client reads `cold`.
    assert!(flip_in_file(&file, VALUE.as_bytes()) >= 1);
    wait_for_corrupt(&mut c, member).await;
    let lines = damage_lines(&log);
    let want_rev = format!("revision={rev}_0");
    assert!(
        lines.iter().any(|l| l.contains(&want_rev)
            && l.contains("key=\"cold\"")
            && l.contains("during=\"scrub\"")),
        "the scrub names the key and revision: {lines:#?}"
    );
    let err = c.get("cold", None).await.unwrap_err();
    assert_eq!(code_and_message(err).0, tonic::Code::DataLoss);
}
