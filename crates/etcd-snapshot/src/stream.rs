//! The Snapshot RPC's stream: the store as an etcd bbolt file, cut into etcd's 32 KiB
//! messages counting down `remaining_bytes`, then the file's SHA-256 as the last message (etcd's
//! `v3rpc/maintenance.go` sends it the same way, `remaining_bytes` 0).
//!
//! [`SnapshotFile`] is the plain part (two passes over one read transaction: a plan that fixes
//! the size, then the pages as they are written, so memory stays at a chunk or two whatever the
//! store's size); [`send_snapshot`] runs it into a channel on a blocking thread.

use std::time::Instant;

use actcd_types::EtcdError;
use actcd_types::msg::SnapshotChunk;
use actcd_types::storage::ReadTxn;
use tokio::sync::mpsc;

use crate::EtcdSnapshotError;
use crate::bolt::Writer;
use crate::layout::EtcdLayout;

/// etcd's snapshot message size (`snapshotSendBufferSize`).
pub const CHUNK_SIZE: usize = 32 * 1024;

/// A snapshot file planned over a read transaction: its size is known, its pages not yet made.
pub struct SnapshotFile<'t> {
    source: EtcdLayout<'t>,
    writer: Writer,
}

impl<'t> SnapshotFile<'t> {
    /// The first pass: reads the whole store once and lays out every page.
    pub fn plan(txn: &'t dyn ReadTxn) -> Result<Self, EtcdSnapshotError> {
        let mut source = EtcdLayout(txn);
        let writer = Writer::plan(&mut source)?;
        Ok(Self { source, writer })
    }

    /// The file's size in bytes (the checksum after it not counted), as `remaining_bytes`
    /// counts it.
    pub fn size(&self) -> u64 {
        self.writer.size()
    }

    /// The second pass: hands `sink` the file in [`CHUNK_SIZE`] chunks (the last one shorter),
    /// each with the bytes still to come after it, then the SHA-256 of the file with
    /// `remaining_bytes` 0. A store that reads differently from the plan, or a sink that fails,
    /// ends it with that error.
    pub fn stream(
        mut self,
        sink: &mut dyn FnMut(SnapshotChunk) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        let total = self.writer.size();
        let mut sha = ring::digest::Context::new(&ring::digest::SHA256);
        let mut chunk = Vec::with_capacity(CHUNK_SIZE);
        let mut sent = 0u64;
        let mut send = |chunk: &mut Vec<u8>| {
            sent += chunk.len() as u64;
            sink(SnapshotChunk {
                remaining_bytes: total.saturating_sub(sent),
                blob: std::mem::replace(chunk, Vec::with_capacity(CHUNK_SIZE)),
            })
        };
        self.writer.write(&mut self.source, &mut |page| {
            sha.update(page);
            let mut rest = page;
            while !rest.is_empty() {
                let take = (CHUNK_SIZE - chunk.len()).min(rest.len());
                chunk.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if chunk.len() == CHUNK_SIZE {
                    send(&mut chunk)?;
                }
            }
            Ok(())
        })?;
        if !chunk.is_empty() {
            send(&mut chunk)?;
        }
        sink(SnapshotChunk {
            remaining_bytes: 0,
            blob: sha.finish().as_ref().to_vec(),
        })
    }
}

/// The error a client is sent when its snapshot fails part way.
fn failed(e: &EtcdSnapshotError) -> EtcdError {
    if let EtcdSnapshotError::Damaged(_) = e {
        return EtcdError::Corrupt;
    }
    let msg = e.to_string();
    if msg.starts_with("snapshot: ") {
        EtcdError::Internal(msg)
    } else {
        EtcdError::Internal(format!("snapshot: {msg}"))
    }
}

/// Streams the store, as `txn` sees it, into `tx` ([`SnapshotFile`]); a failure goes to `tx`
/// as the last item (a damaged `key` record as etcd's `corrupt cluster`) and is returned too,
/// for the caller to act on. Blocks: run it on a blocking thread. Stops when the receiver goes
/// away.
pub fn send_snapshot(
    txn: &dyn ReadTxn,
    tx: &mpsc::Sender<Result<SnapshotChunk, EtcdError>>,
) -> Result<(), EtcdSnapshotError> {
    let started = Instant::now();
    let file = match SnapshotFile::plan(txn) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "database snapshot not sent");
            let _ = tx.blocking_send(Err(failed(&e)));
            return Err(e);
        }
    };
    let total = file.size();
    tracing::info!(
        total_bytes = total,
        planned_ms = started.elapsed().as_millis() as u64,
        "sending database snapshot to client"
    );
    match file.stream(&mut |c| {
        tx.blocking_send(Ok(c))
            .map_err(|_| EtcdSnapshotError::Closed)
    }) {
        Ok(()) => {
            tracing::info!(
                total_bytes = total,
                took_ms = started.elapsed().as_millis() as u64,
                "successfully sent database snapshot to client"
            );
            Ok(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "database snapshot not sent");
            let _ = tx.blocking_send(Err(failed(&e)));
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bolt;
    use actcd_types::Revision;
    use actcd_types::storage::{KvEngine, MemEngine, Table};

    /// A store of `n` key records of 300 bytes each.
    fn store(n: i64) -> MemEngine {
        let e = MemEngine::default();
        let mut w = e.write().unwrap();
        for main in 2..2 + n {
            // Stored with a checksum; 300 bytes in etcd's file.
            let at = Revision::new(main, 0).to_bytes(false);
            w.put(
                Table::Key,
                &at,
                &actcd_types::key_record::seal(&at, &[7u8; 300]),
            )
            .unwrap();
        }
        w.commit().unwrap();
        e
    }

    #[test]
    fn chunks_count_down_and_end_with_the_files_sha256() {
        struct Case {
            records: i64,
            want_size: u64,
        }
        let cases = [
            // Three pages (metas, freelist), a leaf per bucket (ten), the root's leaf.
            Case {
                records: 0,
                want_size: 14 * 4096,
            },
            // `key` with 333-byte elements, twelve to a leaf: 167 leaves, two branch pages of
            // 33-byte elements over them and one above those.
            Case {
                records: 2000,
                want_size: (13 + 167 + 3) * 4096,
            },
        ];
        for c in cases {
            let e = store(c.records);
            let txn = e.read().unwrap();
            let file = SnapshotFile::plan(&*txn).unwrap();
            let total = file.size();
            assert_eq!(total, c.want_size, "{} records", c.records);
            let mut chunks = Vec::new();
            file.stream(&mut |chunk| {
                chunks.push(chunk);
                Ok(())
            })
            .unwrap();
            let (last, data) = chunks.split_last().unwrap();
            assert_eq!(data.len() as u64, total.div_ceil(CHUNK_SIZE as u64));
            let mut file = Vec::new();
            for (i, chunk) in data.iter().enumerate() {
                if i + 1 < data.len() {
                    assert_eq!(chunk.blob.len(), CHUNK_SIZE);
                }
                file.extend_from_slice(&chunk.blob);
                assert_eq!(chunk.remaining_bytes, total - file.len() as u64);
            }
            assert_eq!(file.len() as u64, total);
            assert_eq!(last.remaining_bytes, 0);
            let sha = ring::digest::digest(&ring::digest::SHA256, &file);
            assert_eq!(last.blob, sha.as_ref());
            let db = bolt::read(&file).unwrap();
            let key = db.buckets.iter().find(|b| b.0 == b"key").unwrap();
            assert_eq!(key.1.len(), c.records as usize);
        }
    }

    #[test]
    fn a_sink_that_fails_stops_the_stream() {
        let e = store(2000);
        let txn = e.read().unwrap();
        let file = SnapshotFile::plan(&*txn).unwrap();
        let mut taken = 0;
        let got = file.stream(&mut |_| {
            taken += 1;
            if taken == 3 {
                Err(EtcdSnapshotError::Closed)
            } else {
                Ok(())
            }
        });
        assert!(matches!(got, Err(EtcdSnapshotError::Closed)));
        assert_eq!(taken, 3);
    }

    #[test]
    fn a_failure_reaches_the_receiver_last() {
        let e = store(10);
        let txn = e.read().unwrap();
        let (tx, mut rx) = mpsc::channel(1024);
        let _ = send_snapshot(&*txn, &tx);
        drop(tx);
        let mut items = Vec::new();
        while let Ok(item) = rx.try_recv() {
            items.push(item);
        }
        assert!(items.iter().all(Result::is_ok));
        assert_eq!(items.last().unwrap().as_ref().unwrap().remaining_bytes, 0);

        // A member record that is not one: the plan fails, and that is all the receiver gets.
        let mut w = e.write().unwrap();
        w.put(Table::Members, b"1", b"\xff\xff").unwrap();
        w.commit().unwrap();
        let txn = e.read().unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let _ = send_snapshot(&*txn, &tx);
        drop(tx);
        let Ok(Err(EtcdError::Internal(msg))) = rx.try_recv() else {
            panic!("an internal error first")
        };
        assert!(msg.starts_with("snapshot: member record"), "{msg}");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_damaged_key_record_fails_the_file_as_corrupt() {
        let e = store(10);
        let at = Revision::new(5, 0).to_bytes(false);
        let mut stored = e.read().unwrap().get(Table::Key, &at).unwrap().unwrap();
        stored[100] ^= 0x10;
        let mut w = e.write().unwrap();
        w.put(Table::Key, &at, &stored).unwrap();
        w.commit().unwrap();
        let txn = e.read().unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let Err(EtcdSnapshotError::Damaged(d)) = send_snapshot(&*txn, &tx) else {
            panic!("the damage is returned to the caller")
        };
        assert_eq!(d.revision, Some(Revision::new(5, 0)));
        drop(tx);
        assert!(matches!(rx.try_recv(), Ok(Err(EtcdError::Corrupt))));
        assert!(rx.try_recv().is_err());
    }
}
