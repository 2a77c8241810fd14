//! The `lose-unsynced` fault's file surgery: after a member is SIGKILLed, cut its files back to
//! what it had fsynced, as a power loss right after the crash would.
//!
//! What was synced only the member knows. A failpoints build of actcd started with
//! `ACTCD_DEBUG_SYNC_LOG=<file>` appends a line there right after each fsync returns (see
//! `actcd_types::synclog`): `wal <segment> <bytes>` and `lmdb <txnid>`. The runner starts each
//! incarnation with an empty log, so the log holds what this incarnation synced:
//!
//! - **WAL segments** named in the log: every byte past the last synced length is zeroed.
//!   Segments are preallocated with zeros (`fallocate`), so zeros are exactly what the disk
//!   held there before the lost writes; the file keeps its length. A segment the log never
//!   names was not written by this incarnation, and is left as it is.
//! - **LMDB** (`member/snap/data.mdb`): with the default `MDB_NOMETASYNC`, each commit
//!   fdatasyncs its data pages and writes its meta page without a sync; the next commit's
//!   fdatasync (or an explicit sync) makes it durable. So at most the newest meta page can be
//!   lost. When the newest transaction in the file is one past the last durable one in the
//!   log, its meta page is "lost": LMDB keeps two meta pages (slot `txnid & 1`) and opens the
//!   one with the higher transaction id, so the lost page's id is set below the other's, and
//!   LMDB opens the previous transaction — which LMDB guarantees is whole (its pages are never
//!   reused by the next commit). Any other shape (an older newest transaction, or more than one
//!   unsynced) is left alone and said so.
//!
//! What this does not emulate: a lost directory entry (new segments and renames are followed
//! by a directory fsync in actcd), reordered page write-back inside the unsynced range (the
//! cut is a prefix), and unsynced writes of earlier incarnations (a process crash keeps them in
//! the page cache, and the next incarnation's first fsync of that file makes them durable).

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// LMDB's file magic, the first field of a meta page.
const MDB_MAGIC: u32 = 0xBEEF_C0DE;
/// Offsets inside a meta page (64-bit LMDB): the 16-byte page header, then `mm_magic` (u32),
/// `mm_version` (u32), `mm_address` (8), `mm_mapsize` (8), two 48-byte `MDB_db`s (the first's
/// `md_pad` is the page size), `mm_last_pg` (8), `mm_txnid` (8).
const META_MAGIC: u64 = 16;
const META_PSIZE: u64 = 16 + 24;
const META_TXNID: u64 = 16 + 128;

/// What the member's sync log says was durable.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    /// Per WAL segment path, the length last synced.
    pub wal: HashMap<PathBuf, u64>,
    /// The newest LMDB transaction whose meta page was synced.
    pub lmdb: Option<u64>,
}

impl Synced {
    pub fn parse(log: &str) -> Synced {
        let mut s = Synced::default();
        for line in log.lines() {
            let mut words = line.splitn(2, ' ');
            match (words.next(), words.next()) {
                (Some("wal"), Some(rest)) => {
                    if let Some((path, len)) = rest.rsplit_once(' ')
                        && let Ok(len) = len.parse()
                    {
                        s.wal.insert(PathBuf::from(path), len);
                    }
                }
                (Some("lmdb"), Some(t)) => {
                    if let Ok(t) = t.trim().parse::<u64>() {
                        s.lmdb = Some(s.lmdb.map_or(t, |o: u64| o.max(t)));
                    }
                }
                _ => {}
            }
        }
        s
    }
}

/// Cuts a killed member's files back to what `log` (its sync log) says was synced. Returns a
/// one-line account of what was lost.
pub fn lose_unsynced(data_dir: &Path, log: &Path) -> std::io::Result<String> {
    let synced = Synced::parse(&std::fs::read_to_string(log).unwrap_or_default());
    let mut lost_bytes = 0u64;
    let mut segments = 0;
    for (path, &len) in &synced.wal {
        let n = zero_after(path, len)?;
        if n > 0 {
            lost_bytes += n;
            segments += 1;
        }
    }
    let lmdb = match synced.lmdb {
        Some(durable) => revert_meta(&data_dir.join("member/snap/data.mdb"), durable)?,
        None => "lmdb: no sync recorded, left alone".to_owned(),
    };
    Ok(format!(
        "wal: {lost_bytes} unsynced byte(s) lost in {segments} segment(s); {lmdb}"
    ))
}

/// Zeroes `path` from `len` to the last non-zero byte; returns how many bytes were non-zero.
fn zero_after(path: &Path, len: u64) -> std::io::Result<u64> {
    let mut f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        // Released (deleted) since: nothing to cut.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let size = f.metadata()?.len();
    if size <= len {
        return Ok(0);
    }
    f.seek(SeekFrom::Start(len))?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail)?;
    let end = tail.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if end == 0 {
        return Ok(0);
    }
    let nonzero = tail[..end].iter().filter(|&&b| b != 0).count() as u64;
    f.seek(SeekFrom::Start(len))?;
    f.write_all(&vec![0u8; end])?;
    f.sync_all()?;
    Ok(nonzero)
}

fn read_u32(f: &std::fs::File, at: u64) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    f.read_exact_at(&mut b, at)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(f: &std::fs::File, at: u64) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, at)?;
    Ok(u64::from_le_bytes(b))
}

/// The two meta pages' transaction ids, or why the file is not one we understand.
fn meta_txnids(f: &std::fs::File) -> std::io::Result<Result<(u64, [u64; 2]), String>> {
    if read_u32(f, META_MAGIC)? != MDB_MAGIC {
        return Ok(Err("no LMDB magic in meta page 0".into()));
    }
    let psize = u64::from(read_u32(f, META_PSIZE)?);
    if !(512..=65536).contains(&psize) || !psize.is_power_of_two() {
        return Ok(Err(format!("implausible page size {psize}")));
    }
    if read_u32(f, psize + META_MAGIC)? != MDB_MAGIC {
        return Ok(Err("no LMDB magic in meta page 1".into()));
    }
    Ok(Ok((
        psize,
        [read_u64(f, META_TXNID)?, read_u64(f, psize + META_TXNID)?],
    )))
}

/// Makes LMDB open the transaction before the newest when the newest meta page is the one
/// unsynced write (`newest == durable + 1`).
fn revert_meta(path: &Path, durable: u64) -> std::io::Result<String> {
    let f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok("lmdb: no data file".into());
        }
        Err(e) => return Err(e),
    };
    let (psize, ids) = match meta_txnids(&f)? {
        Ok(x) => x,
        Err(why) => return Ok(format!("lmdb: left alone ({why})")),
    };
    let (newest_slot, newest) = if ids[0] >= ids[1] {
        (0, ids[0])
    } else {
        (1, ids[1])
    };
    let older = ids[1 - newest_slot];
    if newest <= durable {
        return Ok(format!("lmdb: txn {newest} was synced, nothing lost"));
    }
    if newest != durable + 1 || older != durable {
        return Ok(format!(
            "lmdb: left alone (newest txn {newest}, other meta {older}, last synced {durable})"
        ));
    }
    // The slot's previous content was transaction newest - 2: what the disk held before the
    // lost write, as far as LMDB's choice goes.
    let at = newest_slot as u64 * psize + META_TXNID;
    f.write_all_at(&newest.saturating_sub(2).to_le_bytes(), at)?;
    f.sync_all()?;
    Ok(format!(
        "lmdb: meta page of txn {newest} lost, opens txn {older}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_backend::{BackendOptions, LmdbEngine};
    use actcd_types::storage::{KvEngine, Table};

    /// actcd's own LMDB environment, opened as the daemon opens it (`MDB_NOMETASYNC`).
    fn open(dir: &Path) -> LmdbEngine {
        LmdbEngine::open(dir, BackendOptions::default()).unwrap()
    }

    fn put(e: &LmdbEngine, v: &[u8]) {
        let mut w = e.write().unwrap();
        w.put(Table::Meta, b"k", v).unwrap();
        w.commit().unwrap();
    }

    fn get(e: &LmdbEngine) -> Vec<u8> {
        e.read().unwrap().get(Table::Meta, b"k").unwrap().unwrap()
    }

    #[test]
    fn the_newest_unsynced_meta_page_is_lost_and_the_previous_commit_opens() {
        let dir = tempfile::tempdir().unwrap();
        let (durable, newest) = {
            let e = open(dir.path());
            put(&e, b"one");
            put(&e, b"two");
            let newest = e.last_txn_id().unwrap();
            (newest - 1, newest)
        };
        let msg = revert_meta(&dir.path().join("data.mdb"), durable).unwrap();
        assert_eq!(
            msg,
            format!("lmdb: meta page of txn {newest} lost, opens txn {durable}")
        );
        let e = open(dir.path());
        assert_eq!(e.last_txn_id(), Some(durable));
        assert_eq!(get(&e), b"one");
        // And it goes on: the next commit takes the lost transaction's id and slot.
        put(&e, b"three");
        assert_eq!(get(&e), b"three");
        assert_eq!(e.last_txn_id(), Some(newest));
        drop(e);
        assert_eq!(get(&open(dir.path())), b"three");
    }

    #[test]
    fn a_synced_meta_page_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let newest = {
            let e = open(dir.path());
            put(&e, b"one");
            put(&e, b"two");
            e.force_sync().unwrap();
            e.last_txn_id().unwrap()
        };
        let msg = revert_meta(&dir.path().join("data.mdb"), newest).unwrap();
        assert!(msg.contains("nothing lost"), "{msg}");
        assert_eq!(get(&open(dir.path())), b"two");
    }

    #[test]
    fn wal_bytes_after_the_last_sync_become_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let seg = dir.path().join("0000000000000000-0000000000000001.wal");
        let mut data = vec![7u8; 100];
        data.extend(vec![0u8; 50]);
        std::fs::write(&seg, &data).unwrap();
        let log = dir.path().join("sync.log");
        std::fs::write(
            &log,
            format!("wal {} 40\nwal {} 60\n", seg.display(), seg.display()),
        )
        .unwrap();
        let msg = lose_unsynced(dir.path(), &log).unwrap();
        assert!(
            msg.starts_with("wal: 40 unsynced byte(s) lost in 1 segment(s)"),
            "{msg}"
        );
        let after = std::fs::read(&seg).unwrap();
        assert_eq!(after.len(), 150);
        assert!(after[..60].iter().all(|&b| b == 7));
        assert!(after[60..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_sync_log_parses_paths_with_spaces_and_keeps_the_newest_txn() {
        let s = Synced::parse("wal /a b/x.wal 10\nlmdb 5\nlmdb 7\nlmdb 6\ngarbage\n");
        assert_eq!(s.wal.get(Path::new("/a b/x.wal")), Some(&10));
        assert_eq!(s.lmdb, Some(7));
    }
}
