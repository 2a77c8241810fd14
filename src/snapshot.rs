//! `actcd snapshot save|status|restore`: etcdctl's `snapshot save` and etcdutl's `snapshot
//! status` and `snapshot restore`, on the same file format (an etcd 3.5 bbolt backend with a
//! SHA-256 after its last page), so snapshots move freely between etcd and actcd:
//!
//! - `save <file>` asks one member's Maintenance `Snapshot` and writes `<file>.part`, checks
//!   the checksum the server sent, syncs, and renames it into place.
//! - `status <file>` reads the file as etcdutl does: a CRC32C over every bucket name, key and
//!   value in order, the revision of the last `key` record, the number of records, the size.
//! - `restore <file> --data-dir …` checks the checksum (unless `--skip-hash-check`) and makes a
//!   new data dir holding the file's keys, leases, auth state and alarms as the first member of
//!   a new cluster (`--name`, `--initial-cluster`, `--initial-cluster-token`,
//!   `--initial-advertise-peer-urls`, as etcdutl takes them). With `--bump-revision N
//!   --mark-compacted` (etcdutl 3.5.10, #16165; one needs the other) the revision jumps N past
//!   the file's latest and everything up to there is compacted, so the watches of clients that
//!   knew the old cluster are answered "compacted" instead of missing what happened since.

use std::path::{Path, PathBuf};

use actcd_etcd_snapshot::EtcdSnapshotError;
use actcd_etcd_snapshot::bolt::{Db, FileBytes, Item, ReadAt, Source};
use actcd_proto::etcdserverpb::auth_client::AuthClient;
use actcd_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use actcd_proto::etcdserverpb::{AuthenticateRequest, SnapshotRequest};
use actcd_types::storage::Table;
use clap::{Parser, Subcommand};

use crate::config::{Config, Flags};

const SHA256_LEN: usize = 32;

#[derive(Debug, Parser)]
#[command(
    name = "actcd snapshot",
    about = "Save, inspect and restore etcd v3 snapshots"
)]
pub struct SnapshotCli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Stores a snapshot of one member's backend in a file.
    Save {
        file: PathBuf,
        /// The member to ask (one endpoint, host:port or a URL).
        #[arg(long, default_value = "127.0.0.1:2379")]
        endpoints: String,
        /// `name:password`, when auth is on (Snapshot needs root).
        #[arg(long)]
        user: Option<String>,
        /// CA bundle that verifies the server's certificate (for an `https://` endpoint).
        #[arg(long)]
        cacert: Option<PathBuf>,
        /// Client certificate and key, for servers that ask for one.
        #[arg(long, requires = "key")]
        cert: Option<PathBuf>,
        #[arg(long, requires = "cert")]
        key: Option<PathBuf>,
    },
    /// Prints a snapshot file's hash, revision, record count and size.
    Status {
        file: PathBuf,
        /// simple, json or table.
        #[arg(short = 'w', long = "write-out", default_value = "simple")]
        write_out: String,
    },
    /// Makes a new data directory from a snapshot file.
    Restore {
        file: PathBuf,
        #[arg(long)]
        data_dir: Option<PathBuf>,
        #[arg(long, default_value = "default")]
        name: String,
        #[arg(long)]
        initial_cluster: Option<String>,
        #[arg(long, default_value = "etcd-cluster")]
        initial_cluster_token: String,
        #[arg(long, default_value = "http://localhost:2380")]
        initial_advertise_peer_urls: String,
        /// Accept a file without a checksum (a backend copied out of a data dir).
        #[arg(long)]
        skip_hash_check: bool,
        /// How much to increase the latest revision after restore
        #[arg(long, default_value_t = 0)]
        bump_revision: u64,
        /// Mark the latest revision after restore as the point of scheduled compaction
        /// (required if --bump-revision > 0, disallowed otherwise)
        #[arg(long)]
        mark_compacted: bool,
    },
}

/// What etcdutl prints for a snapshot file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub hash: u32,
    pub revision: i64,
    pub total_key: usize,
    pub total_size: u64,
}

/// Whether a file of `len` bytes ends with a SHA-256 (pages are multiples of 512 bytes).
fn has_checksum(len: u64) -> bool {
    len % 512 == SHA256_LEN as u64
}

/// etcdutl's status of a database, read as it goes (nothing of it kept).
pub fn status_of<R: ReadAt>(db: &mut Db<R>) -> Result<Status, EtcdSnapshotError> {
    let mut hash = 0u32;
    let mut revision = 0;
    let mut total_key = 0;
    let mut in_key = false;
    db.visit(&mut |item| {
        match item {
            Item::Bucket(name) => {
                hash = crc32c::crc32c_append(hash, name);
                in_key = name == b"key";
            }
            Item::Pair(k, v) => {
                hash = crc32c::crc32c_append(hash, k);
                hash = crc32c::crc32c_append(hash, v);
                if in_key && let Some(main) = k.get(..8) {
                    revision = i64::from_be_bytes(main.try_into().unwrap_or_default());
                }
                total_key += 1;
            }
        }
        Ok(())
    })?;
    Ok(Status {
        hash,
        revision,
        total_key,
        total_size: db.size(),
    })
}

/// Bytes as go-humanize writes them (SI units, one decimal under 10), as etcdutl prints sizes.
pub(crate) fn humanize_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 10 {
        return format!("{n} B");
    }
    let e = ((n as f64).ln() / 1000f64.ln()).floor() as usize;
    let v = n as f64 / 1000f64.powi(e as i32);
    let v = (v * 10.0 + 0.5).floor() / 10.0;
    if v < 10.0 {
        format!("{v:.1} {}", UNITS[e])
    } else {
        format!("{v:.0} {}", UNITS[e])
    }
}

fn render(s: &Status, format: &str) -> Result<String, String> {
    let row = [
        format!("{:x}", s.hash),
        s.revision.to_string(),
        s.total_key.to_string(),
        humanize_bytes(s.total_size),
    ];
    match format {
        "simple" => Ok(row.join(", ")),
        "json" => Ok(format!(
            "{{\"hash\":{},\"revision\":{},\"totalKey\":{},\"totalSize\":{}}}",
            s.hash, s.revision, s.total_key, s.total_size
        )),
        "table" => {
            let head = ["HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE"];
            let widths: Vec<usize> = head
                .iter()
                .zip(&row)
                .map(|(h, r)| h.len().max(r.len()) + 2)
                .collect();
            let line: String = widths.iter().fold("+".into(), |mut l, w| {
                l.push_str(&"-".repeat(*w));
                l.push('+');
                l
            });
            // Headers centred (the odd space on the right), values right-aligned, as
            // etcdutl's table writer lays them out.
            let cells = |cells: &[String], centred: bool| {
                let mut l = String::from("|");
                for (c, w) in cells.iter().zip(&widths) {
                    let pad = w - c.len();
                    let left = if centred { pad / 2 } else { pad - 1 };
                    l.push_str(&" ".repeat(left));
                    l.push_str(c);
                    l.push_str(&" ".repeat(pad - left));
                    l.push('|');
                }
                l
            };
            let head: Vec<String> = head.iter().map(|h| h.to_string()).collect();
            Ok(format!(
                "{line}\n{}\n{line}\n{}\n{line}",
                cells(&head, true),
                cells(&row, false)
            ))
        }
        other => Err(format!("unsupported output format {other:?}")),
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// A snapshot file, opened to be read in place: the whole of it.
fn open_snapshot(path: &Path) -> Result<FileBytes, String> {
    let opened = std::fs::File::open(path).and_then(|f| Ok((f.metadata()?.len(), f)));
    let (len, file) = opened.map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(FileBytes::new(file, len))
}

/// How much of a snapshot file is the database (all of it, or all but the SHA-256 after it),
/// its checksum checked unless `skip_hash_check`: read a MiB at a time, nothing kept.
pub fn checked_len(file: &dyn ReadAt, skip_hash_check: bool) -> Result<u64, String> {
    let len = file.size();
    if !has_checksum(len) {
        if skip_hash_check {
            return Ok(len);
        }
        return Err("snapshot missing hash but --skip-hash-check=false".into());
    }
    let db_len = len - SHA256_LEN as u64;
    if !skip_hash_check {
        let io = |e: std::io::Error| EtcdSnapshotError::from(e).to_string();
        let mut sum = [0u8; SHA256_LEN];
        file.read_at(&mut sum, db_len).map_err(io)?;
        let mut sha = ring::digest::Context::new(&ring::digest::SHA256);
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = 0;
        while at < db_len {
            let n = (db_len - at).min(chunk.len() as u64) as usize;
            let part = &mut chunk[..n];
            file.read_at(part, at).map_err(io)?;
            sha.update(part);
            at += n as u64;
        }
        let got = sha.finish();
        if got.as_ref() != sum {
            return Err(format!(
                "expected sha256 {:?}, got {:?}",
                &sum[..],
                got.as_ref()
            ));
        }
    }
    Ok(db_len)
}

/// The database part of a snapshot file held in memory, its checksum checked unless
/// `skip_hash_check` ([`checked_len`]).
pub fn checked_db(data: &[u8], skip_hash_check: bool) -> Result<&[u8], String> {
    let len = checked_len(&data, skip_hash_check)?;
    Ok(data.get(..len as usize).unwrap_or(data))
}

/// Where and how `save` connects: etcdctl's `--endpoints`, `--user`, `--cacert`, `--cert`,
/// `--key`.
struct Target<'a> {
    endpoint: &'a str,
    user: Option<&'a str>,
    cacert: Option<&'a Path>,
    identity: Option<(&'a Path, &'a Path)>,
}

async fn connect(t: &Target<'_>) -> Result<tonic::transport::Channel, String> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let tls = t.cacert.is_some() || t.identity.is_some() || t.endpoint.starts_with("https://");
    let url = match t.endpoint.split_once("://") {
        Some(_) => t.endpoint.to_string(),
        None if tls => format!("https://{}", t.endpoint),
        None => format!("http://{}", t.endpoint),
    };
    let mut endpoint = Endpoint::from_shared(url.clone()).map_err(|e| e.to_string())?;
    if tls {
        let mut config = ClientTlsConfig::new().with_enabled_roots();
        if let Some(ca) = t.cacert {
            config = config.ca_certificate(Certificate::from_pem(read_file(ca)?));
        }
        if let Some((cert, key)) = t.identity {
            config = config.identity(Identity::from_pem(read_file(cert)?, read_file(key)?));
        }
        endpoint = endpoint.tls_config(config).map_err(|e| e.to_string())?;
    }
    endpoint.connect().await.map_err(|e| format!("{url}: {e}"))
}

async fn save(file: &Path, target: &Target<'_>) -> Result<(), String> {
    let channel = connect(target).await?;
    let user = target.user;
    let mut token = None;
    if let Some(user) = user {
        let (name, password) = user.split_once(':').ok_or("--user must be name:password")?;
        let r = AuthClient::new(channel.clone())
            .authenticate(AuthenticateRequest {
                name: name.into(),
                password: password.into(),
            })
            .await
            .map_err(|s| s.message().to_string())?;
        token = Some(r.into_inner().token);
    }
    let mut req = tonic::Request::new(SnapshotRequest {});
    if let Some(t) = token {
        let value = t.parse().map_err(|_| "the token is not ASCII")?;
        req.metadata_mut().insert("token", value);
    }
    let mut stream = MaintenanceClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .snapshot(req)
        .await
        .map_err(|s| s.message().to_string())?
        .into_inner();
    let mut data = Vec::new();
    while let Some(msg) = stream
        .message()
        .await
        .map_err(|s| s.message().to_string())?
    {
        data.extend_from_slice(&msg.blob);
    }
    checked_db(&data, false)?;
    let part = PathBuf::from(format!("{}.part", file.display()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        // 0600, as etcdutl writes it: the file holds every value and the auth tables.
        let mut f = actcd_types::private_fs::create_private_file(&part, true)?;
        f.write_all(&data)?;
        f.sync_all()?;
        std::fs::rename(&part, file)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&part);
        format!("could not save {}: {e}", file.display())
    })
}

/// Where a restore's records go: table, key, value, borrowed for the call.
type Put<'f> = dyn FnMut(Table, &[u8], &[u8]) -> Result<(), EtcdSnapshotError> + 'f;

/// The records a restore writes, handed to `put` as they are read from `db`, in the order
/// they go in: the file's records ([`Db::to_records`]), the `key` table's format version, then
/// with `bump` > 0 etcdutl's `--bump-revision` and `--mark-compacted` (#16165): a record of no
/// key at the file's latest revision plus `bump` (sub 0), as etcdutl's `unsafeBumpRevision`
/// writes it, and the scheduled compaction set there (the file's own left out), which opening
/// the store then carries out. Only the latest revision is kept between records.
fn replay<R: ReadAt>(
    db: &mut Db<R>,
    bump: u64,
    put: &mut Put<'_>,
) -> Result<(), EtcdSnapshotError> {
    use actcd_etcd_snapshot::META_SCHEDULED_COMPACT;
    use actcd_types::Revision;
    let mut latest: Option<Revision> = None;
    db.to_records(&mut |t, k, v| {
        if t == Table::Key
            && let Some((r, _)) = Revision::from_bytes(k)
        {
            latest = latest.max(Some(r));
        }
        if bump > 0 && t == Table::Meta && k == META_SCHEDULED_COMPACT {
            return Ok(());
        }
        put(t, k, v)
    })?;
    if bump == 0 {
        return Ok(());
    }
    let latest = latest.unwrap_or_default();
    let bumped = latest.main.saturating_add(bump as i64);
    tracing::info!(
        latest_revision = latest.main,
        bump_amount = bump,
        new_latest_revision = bumped,
        "bumping latest revision"
    );
    let k = Revision::new(bumped, 0).to_bytes(false);
    put(Table::Key, &k, &actcd_types::key_record::seal(&k, &[]))?;
    tracing::info!(revision = bumped, "marking revision compacted");
    put(Table::Meta, META_SCHEDULED_COMPACT, &bumped.to_be_bytes())
}

#[allow(clippy::too_many_arguments)]
fn restore(
    file: &Path,
    data_dir: Option<PathBuf>,
    name: &str,
    initial_cluster: Option<String>,
    token: &str,
    peer_urls: &str,
    skip_hash_check: bool,
    bump: u64,
) -> Result<(), String> {
    let data_dir = data_dir.unwrap_or_else(|| PathBuf::from(format!("{name}.etcd")));
    let mut args = vec![
        "actcd".to_string(),
        "--name".into(),
        name.into(),
        "--data-dir".into(),
        data_dir.display().to_string(),
        "--initial-cluster-token".into(),
        token.into(),
        "--initial-advertise-peer-urls".into(),
        peer_urls.into(),
    ];
    if let Some(ic) = initial_cluster {
        args.extend(["--initial-cluster".into(), ic]);
    }
    let snapshot = open_snapshot(file)?;
    // The new backend's map is sized as a member's is for a quota of the file's size: a file
    // past half the default map (8 GiB) would not fit it otherwise.
    args.extend(["--quota-backend-bytes".into(), snapshot.size().to_string()]);
    let flags = Flags::try_parse_from(args).map_err(|e| e.to_string())?;
    let cfg = Config::try_from(flags).map_err(|e| e.to_string())?;
    let db_len = checked_len(&snapshot, skip_hash_check)?;
    let mut db = Db::open(snapshot.prefix(db_len)).map_err(|e| e.to_string())?;
    crate::node::restore(&cfg, |put| {
        replay(&mut db, bump, &mut |t, k, v| {
            put(t, k, v).map_err(EtcdSnapshotError::from)
        })
    })
    .map_err(|e| e.to_string())?;
    tracing::info!(
        path = %file.display(),
        data_dir = %cfg.data_dir.display(),
        member_id = format!("{:x}", cfg.member_id),
        cluster_id = format!("{:x}", cfg.cluster_id),
        "restored snapshot"
    );
    Ok(())
}

/// Runs one `actcd snapshot …` command; `Err` is what to print before exiting with 1.
pub fn run(cli: SnapshotCli) -> Result<(), String> {
    match cli.command {
        Command::Save {
            file,
            endpoints,
            user,
            cacert,
            cert,
            key,
        } => {
            if endpoints.contains(',') {
                return Err(format!(
                    "snapshot must be requested to one selected node, not multiple [{}]",
                    endpoints.replace(',', " ")
                ));
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            let target = Target {
                endpoint: &endpoints,
                user: user.as_deref(),
                cacert: cacert.as_deref(),
                identity: cert.as_deref().zip(key.as_deref()),
            };
            rt.block_on(save(&file, &target))?;
            println!("Snapshot saved at {}", file.display());
            Ok(())
        }
        Command::Status { file, write_out } => {
            let mut db = Db::open(open_snapshot(&file)?).map_err(|e| e.to_string())?;
            let status = status_of(&mut db).map_err(|e| e.to_string())?;
            println!("{}", render(&status, &write_out)?);
            Ok(())
        }
        Command::Restore {
            file,
            data_dir,
            name,
            initial_cluster,
            initial_cluster_token,
            initial_advertise_peer_urls,
            skip_hash_check,
            bump_revision,
            mark_compacted,
        } => {
            // etcdutl's check and words (its flag is --bump-revision).
            if (bump_revision == 0) == mark_compacted {
                return Err("--mark-compacted required if --revision-bump > 0".into());
            }
            restore(
                &file,
                data_dir,
                &name,
                initial_cluster,
                &initial_cluster_token,
                &initial_advertise_peer_urls,
                skip_hash_check,
                bump_revision,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_etcd_snapshot::bolt;

    /// The file etcd 3.5.1 wrote (see actcd-etcd-snapshot's bolt tests), whose status etcdutl 3.5.1
    /// prints as `{"hash":1802528434,"revision":5,"totalKey":10,"totalSize":24576}`.
    const ETCD: &[u8] =
        include_bytes!("../crates/etcd-snapshot/tests/fixtures/etcd-3.5.1-snapshot.db");

    /// What a restore writes for the file in memory, through [`replay`].
    fn replayed(file: &[u8], bump: u64) -> Vec<actcd_etcd_snapshot::OwnedRecord> {
        let mut db = Db::open(checked_db(file, false).unwrap()).unwrap();
        let mut records = Vec::new();
        replay(&mut db, bump, &mut |t, k, v| {
            records.push((t, k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        records
    }

    /// Without a bump, a restore writes exactly the file's records as `from_etcd_buckets`
    /// reads them from the whole file in memory, in the same order.
    #[test]
    fn replay_writes_the_files_records_in_order() {
        let db = bolt::read(checked_db(ETCD, false).unwrap()).unwrap();
        let want = actcd_etcd_snapshot::from_etcd_buckets(&db.buckets).unwrap();
        assert_eq!(replayed(ETCD, 0), want);
    }

    /// etcdutl's `modifyLatestRevision`: a keyless record at latest + N, and the scheduled
    /// compaction moved there (whatever the file said), both after the file's records.
    #[test]
    fn bumping_adds_a_record_past_the_latest_and_schedules_its_compaction() {
        use actcd_etcd_snapshot::META_SCHEDULED_COMPACT;
        use actcd_types::Revision;
        let plain = replayed(ETCD, 0);
        let records = replayed(ETCD, 100);
        let added = Revision::new(5 + 100, 0).to_bytes(false);
        let (file_part, last_two) = records.split_at(records.len() - 2);
        let file_part = file_part.to_vec();
        let without_schedule: Vec<_> = plain
            .iter()
            .filter(|(t, k, _)| !(*t == Table::Meta && k == META_SCHEDULED_COMPACT))
            .cloned()
            .collect();
        assert_eq!(last_two.len(), 2);
        assert_eq!(file_part, without_schedule);
        let keyed: Vec<_> = records
            .iter()
            .filter(|(t, k, _)| *t == Table::Key && *k == added)
            .map(|(_, k, v)| actcd_types::key_record::open(k, v).unwrap().to_vec())
            .collect();
        assert_eq!(keyed, [Vec::<u8>::new()]);
        let scheduled: Vec<_> = records
            .iter()
            .filter(|(t, k, _)| *t == Table::Meta && k == META_SCHEDULED_COMPACT)
            .map(|(_, _, v)| v.clone())
            .collect();
        assert_eq!(scheduled, [105i64.to_be_bytes().to_vec()]);
        assert_eq!(last_two[0].1, added);
    }

    #[test]
    fn status_is_etcdutls() {
        let mut db = Db::open(checked_db(ETCD, false).unwrap()).unwrap();
        let s = status_of(&mut db).unwrap();
        assert_eq!(
            render(&s, "json").unwrap(),
            r#"{"hash":1802528434,"revision":5,"totalKey":10,"totalSize":24576}"#
        );
        assert_eq!(render(&s, "simple").unwrap(), "6b7066b2, 5, 10, 25 kB");
        assert_eq!(
            render(&s, "table").unwrap(),
            "+----------+----------+------------+------------+\n\
             |   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE |\n\
             +----------+----------+------------+------------+\n\
             | 6b7066b2 |        5 |         10 |      25 kB |\n\
             +----------+----------+------------+------------+"
        );
        assert!(render(&s, "yaml").is_err());
    }

    /// The file on disk, read in place, says what it says in memory: its checksum, its status
    /// (the checksum after the pages ignored) and its records.
    #[test]
    fn a_file_on_disk_reads_as_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap.db");
        std::fs::write(&path, ETCD).unwrap();
        let file = open_snapshot(&path).unwrap();
        assert_eq!(file.size(), ETCD.len() as u64);
        let db_len = checked_len(&file, false).unwrap();
        assert_eq!(db_len, (ETCD.len() - SHA256_LEN) as u64);
        let mut whole = Db::open(open_snapshot(&path).unwrap()).unwrap();
        let s = status_of(&mut whole).unwrap();
        assert_eq!((s.hash, s.revision, s.total_key), (1802528434, 5, 10));
        let mut db = Db::open(file.prefix(db_len)).unwrap();
        let mut records = Vec::new();
        replay(&mut db, 0, &mut |t, k, v| {
            records.push((t, k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(records, replayed(ETCD, 0));

        let mut bad = ETCD.to_vec();
        bad[5000] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let file = open_snapshot(&path).unwrap();
        assert!(
            checked_len(&file, false)
                .unwrap_err()
                .starts_with("expected sha256")
        );
        let missing = dir.path().join("missing.db");
        assert!(
            open_snapshot(&missing)
                .unwrap_err()
                .starts_with(&missing.display().to_string())
        );
    }

    #[test]
    fn checksums_are_checked() {
        let mut bad = ETCD.to_vec();
        bad[5000] ^= 1;
        assert!(
            checked_db(&bad, false)
                .unwrap_err()
                .starts_with("expected sha256")
        );
        assert!(checked_db(&bad, true).is_ok());
        let bare = &ETCD[..ETCD.len() - SHA256_LEN];
        assert_eq!(
            checked_db(bare, false).unwrap_err(),
            "snapshot missing hash but --skip-hash-check=false"
        );
        assert_eq!(checked_db(bare, true).unwrap().len(), bare.len());
    }

    #[test]
    fn sizes_print_like_go_humanize() {
        assert_eq!(humanize_bytes(0), "0 B");
        assert_eq!(humanize_bytes(999), "999 B");
        assert_eq!(humanize_bytes(24576), "25 kB");
        assert_eq!(humanize_bytes(1500), "1.5 kB");
        assert_eq!(humanize_bytes(2_147_483_648), "2.1 GB");
    }
}
