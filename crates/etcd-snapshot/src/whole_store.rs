//! The state machine as one blob, for a member too far behind for the log.
//!
//! The blob is engine-neutral: every record of every table, read in one read transaction (so
//! it is consistent, and covers exactly the consistent index stored in its `meta` table),
//! framed as `table (1 byte) · key length (u32 BE) · key · value length (u32 BE) · value`, after a
//! magic header. Installing it replaces every table's contents in one write transaction: a
//! crash leaves either the old state or the new one.
//!
//! etcd's snapshot file (the Snapshot RPC, `actcd snapshot`) is another format, kept in
//! `actcd-etcd-snapshot`.
//!
//! `key` records travel as stored, checksum included (`actcd_types::key_record`), and each is
//! checked as it is read: a damaged record fails the snapshot, naming it, rather than reaching
//! a follower as good data. A blob from a member older than checksums (no format version in its
//! `meta`) carries plain records; the MVCC store seals them as it installs it.

use actcd_types::key_record;
use actcd_types::storage::{ReadTxn, StorageError, Table, WriteTxn};

const MAGIC: &[u8; 8] = b"actcdsn1";

fn table_code(t: Table) -> u8 {
    Table::ALL.iter().position(|x| *x == t).unwrap_or(0) as u8
}

/// Every record of every table.
pub fn encode<R: ReadTxn + ?Sized>(txn: &R) -> Result<Vec<u8>, StorageError> {
    encode_into(txn, Vec::new())
}

/// [`encode`] into `out` (cleared first; pass one with room for the blob).
pub fn encode_into<R: ReadTxn + ?Sized>(
    txn: &R,
    mut out: Vec<u8>,
) -> Result<Vec<u8>, StorageError> {
    out.clear();
    encode_to(txn, &mut out)?;
    Ok(out)
}

/// [`encode`] written to `out` as it is read, so the blob is never whole in memory (a leader
/// streams it to a follower). A write error stops the reading and is returned.
pub fn encode_to<R: ReadTxn + ?Sized, W: std::io::Write>(
    txn: &R,
    out: &mut W,
) -> Result<(), StorageError> {
    let write_err = |e: std::io::Error| StorageError(format!("snapshot not made: {e}"));
    out.write_all(MAGIC).map_err(write_err)?;
    let mut failed = None;
    for t in Table::ALL {
        let code = table_code(t);
        txn.scan(t, &[], None, &mut |k, v| {
            if t == Table::Key
                && let Err(d) = key_record::open(k, v)
            {
                failed = Some(StorageError(format!("snapshot not made: {d}")));
                return false;
            }
            let written = out
                .write_all(&[code])
                .and_then(|()| out.write_all(&(k.len() as u32).to_be_bytes()))
                .and_then(|()| out.write_all(k))
                .and_then(|()| out.write_all(&(v.len() as u32).to_be_bytes()))
                .and_then(|()| out.write_all(v));
            match written {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(write_err(e));
                    false
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    out.flush().map_err(write_err)
}

/// One record of a blob: its table, key and value.
pub type Record<'a> = (Table, &'a [u8], &'a [u8]);

fn bad(what: &str) -> StorageError {
    StorageError(format!("snapshot: {what}"))
}

/// The records of a blob, read in place one at a time; a malformed one ends the walk with an
/// error.
pub fn records(data: &[u8]) -> Result<Records<'_>, StorageError> {
    let rest = data
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("not an actcd snapshot"))?;
    Ok(Records { rest })
}

/// See [`records`].
#[derive(Debug)]
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Records<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StorageError> {
        let (head, tail) = self
            .rest
            .split_at_checked(n)
            .ok_or_else(|| bad("truncated"))?;
        self.rest = tail;
        Ok(head)
    }

    fn take_len(&mut self) -> Result<usize, StorageError> {
        let n = self.take(4)?;
        Ok(u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
    }

    fn next_record(&mut self, code: u8) -> Result<Record<'a>, StorageError> {
        let table = *Table::ALL
            .get(code as usize)
            .ok_or_else(|| bad("unknown table"))?;
        let klen = self.take_len()?;
        let k = self.take(klen)?;
        let vlen = self.take_len()?;
        let v = self.take(vlen)?;
        Ok((table, k, v))
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&code, tail) = self.rest.split_first()?;
        self.rest = tail;
        let record = self.next_record(code);
        if record.is_err() {
            self.rest = &[];
        }
        Some(record)
    }
}

/// The records of a blob, checked to be whole.
pub fn decode(data: &[u8]) -> Result<Vec<Record<'_>>, StorageError> {
    records(data)?.collect()
}

/// A leader's blob installed in place of everything in `txn`, read from `data` (a mapped file)
/// record by record. The blob is walked twice: once to check that it is whole and to read the
/// format of its `key` records, then to write.
///
/// A blob from a member older than checksums (no `actcdKeyFormat` in its `meta`) carries plain
/// `key` records: each is sealed on the way in and the format recorded, as the store's
/// one-time upgrade would have done, so the table holds one form. A newer format than this
/// build reads is refused before anything is written.
pub fn install_blob<W: WriteTxn + ?Sized>(txn: &mut W, data: &[u8]) -> Result<(), StorageError> {
    let seal = needs_sealing(data)?;
    for t in Table::ALL {
        txn.clear(t)?;
    }
    for record in records(data)? {
        let (t, k, v) = record?;
        put_record(txn, seal, t, k, v)?;
    }
    if seal {
        put_format(txn)?;
    }
    Ok(())
}

/// A new write transaction on the store being filled.
pub type BeginFn<'a> = dyn FnMut() -> Result<Box<dyn WriteTxn + 'a>, StorageError> + 'a;

/// [`install_blob`] into an empty store that is not in use yet (a follower building the copy
/// it will swap in), committing every `batch_bytes` of records: a write transaction keeps
/// the pages it wrote in memory until it commits, so one transaction would hold the whole
/// store. A failure part-way leaves a partial store, which the caller deletes.
pub fn install_blob_batched(
    begin: &mut BeginFn<'_>,
    data: &[u8],
    batch_bytes: usize,
) -> Result<(), StorageError> {
    let seal = needs_sealing(data)?;
    let mut txn = begin()?;
    let mut pending = 0usize;
    for record in records(data)? {
        let (t, k, v) = record?;
        put_record(&mut *txn, seal, t, k, v)?;
        pending += k.len() + v.len();
        if pending >= batch_bytes {
            txn.commit()?;
            txn = begin()?;
            pending = 0;
        }
    }
    if seal {
        put_format(&mut *txn)?;
    }
    txn.commit()
}

/// Whether the blob's `key` records must be sealed on the way in (a member older than
/// checksums sent it); checks the whole blob on the way.
fn needs_sealing(data: &[u8]) -> Result<bool, StorageError> {
    let mut format = None;
    for record in records(data)? {
        let (t, k, v) = record?;
        if t == Table::Meta && k == key_record::FORMAT_META_KEY {
            format = Some(
                <[u8; 8]>::try_from(v)
                    .map(u64::from_be_bytes)
                    .map_err(|_| bad("its key format is not a number"))?,
            );
        }
    }
    match format {
        Some(key_record::FORMAT_CHECKSUMMED) => Ok(false),
        Some(_) => Err(StorageError(
            "the snapshot's key records are in a format this build does not read".into(),
        )),
        None => Ok(true),
    }
}

fn put_record<W: WriteTxn + ?Sized>(
    txn: &mut W,
    seal: bool,
    t: Table,
    k: &[u8],
    v: &[u8],
) -> Result<(), StorageError> {
    if seal && t == Table::Key {
        txn.put(t, k, &key_record::seal(k, v))
    } else {
        txn.put(t, k, v)
    }
}

fn put_format<W: WriteTxn + ?Sized>(txn: &mut W) -> Result<(), StorageError> {
    let version = key_record::FORMAT_CHECKSUMMED.to_be_bytes();
    txn.put(Table::Meta, key_record::FORMAT_META_KEY, &version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_types::storage::{KvEngine, MemEngine};

    #[test]
    fn a_snapshot_replaces_everything_and_refuses_damage() {
        let from = MemEngine::default();
        let mut w = from.write().unwrap();
        w.put(Table::Key, b"k1", &key_record::seal(b"k1", b"v1"))
            .unwrap();
        w.put(Table::Meta, b"consistent_index", &9u64.to_be_bytes())
            .unwrap();
        // Today's format: installed as it is, not sealed again.
        let format = key_record::FORMAT_CHECKSUMMED.to_be_bytes();
        w.put(Table::Meta, key_record::FORMAT_META_KEY, &format)
            .unwrap();
        w.put(Table::Members, b"1", b"").unwrap();
        w.commit().unwrap();
        let blob = encode(&*from.read().unwrap()).unwrap();

        let to = MemEngine::default();
        let mut w = to.write().unwrap();
        w.put(Table::Key, b"stale", b"x").unwrap();
        w.put(Table::Alarm, b"a", b"x").unwrap();
        w.commit().unwrap();
        let mut w = to.write().unwrap();
        install_blob(&mut *w, &blob).unwrap();
        w.commit().unwrap();
        assert_eq!(
            encode(&*to.read().unwrap()).unwrap(),
            blob,
            "same records, nothing else"
        );

        for cut in [0, 5, 9, blob.len() - 1] {
            assert!(decode(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_table = blob.clone();
        wrong_table[8] = 200;
        assert!(decode(&wrong_table).is_err());

        // A damaged key record is never sent.
        let mut w = from.write().unwrap();
        w.put(Table::Key, b"k2", &key_record::seal(b"k2", b"v2 "))
            .unwrap();
        w.put(Table::Key, b"k3", b"\0\0\0\0v3").unwrap();
        w.commit().unwrap();
        let err = encode(&*from.read().unwrap()).unwrap_err();
        assert!(err.0.contains("damaged record"), "{err}");
    }

    /// A writer that takes `room` bytes, then fails, as a gone receiver does.
    struct Cut {
        room: usize,
        got: Vec<u8>,
    }

    impl std::io::Write for Cut {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.got.len() + b.len() > self.room {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            self.got.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn streamed_blobs_are_the_same_bytes_and_a_write_error_stops_them() {
        let from = MemEngine::default();
        let mut w = from.write().unwrap();
        for i in 0..50u32 {
            let k = format!("k{i:03}");
            w.put(
                Table::Key,
                k.as_bytes(),
                &key_record::seal(k.as_bytes(), &[7; 900]),
            )
            .unwrap();
        }
        w.put(Table::Lease, b"l", b"lease").unwrap();
        w.commit().unwrap();
        let txn = from.read().unwrap();
        let whole = encode(&*txn).unwrap();
        let mut out = Cut {
            room: usize::MAX,
            got: Vec::new(),
        };
        encode_to(&*txn, &mut out).unwrap();
        assert_eq!(out.got, whole);
        assert_eq!(records(&whole).unwrap().count(), 51);

        let mut cut = Cut {
            room: 10_000,
            got: Vec::new(),
        };
        let err = encode_to(&*txn, &mut cut).unwrap_err();
        assert!(err.0.contains("snapshot not made"), "{err}");
        assert!(cut.got.len() <= 10_000);
    }

    #[test]
    fn installing_in_place_seals_an_old_blob_and_refuses_a_newer_format() {
        let plain = |extra: &[(Table, &[u8], &[u8])]| {
            let mut blob = MAGIC.to_vec();
            let mut all = vec![(Table::Key, &b"r1"[..], &b"plain kv"[..])];
            all.extend_from_slice(extra);
            all.sort_by_key(|(t, _, _)| table_code(*t));
            for (t, k, v) in all {
                blob.push(table_code(t));
                blob.extend_from_slice(&(k.len() as u32).to_be_bytes());
                blob.extend_from_slice(k);
                blob.extend_from_slice(&(v.len() as u32).to_be_bytes());
                blob.extend_from_slice(v);
            }
            blob
        };
        let to = MemEngine::default();
        let mut w = to.write().unwrap();
        w.put(Table::Key, b"stale", b"x").unwrap();
        w.commit().unwrap();

        // An old member's blob: its key records are sealed and the format recorded.
        let mut w = to.write().unwrap();
        install_blob(&mut *w, &plain(&[])).unwrap();
        w.commit().unwrap();
        let txn = to.read().unwrap();
        let sealed = txn.get(Table::Key, b"r1").unwrap().unwrap();
        assert_eq!(key_record::open(b"r1", &sealed).unwrap(), b"plain kv");
        assert_eq!(txn.get(Table::Key, b"stale").unwrap(), None);
        let format = txn.get(Table::Meta, key_record::FORMAT_META_KEY).unwrap();
        assert_eq!(
            format,
            Some(key_record::FORMAT_CHECKSUMMED.to_be_bytes().to_vec())
        );
        drop(txn);

        // A blob of today's format goes in as it is: the same bytes come out.
        let today = encode(&*to.read().unwrap()).unwrap();
        let again = MemEngine::default();
        let mut w = again.write().unwrap();
        install_blob(&mut *w, &today).unwrap();
        w.commit().unwrap();
        assert_eq!(encode(&*again.read().unwrap()).unwrap(), today);

        // A newer format, or a cut blob, is refused and the transaction's writes are dropped.
        let newer = 2u64.to_be_bytes();
        let newer = plain(&[(Table::Meta, key_record::FORMAT_META_KEY, &newer[..])]);
        for bad in [newer.clone(), today[..today.len() - 3].to_vec()] {
            let mut w = again.write().unwrap();
            assert!(install_blob(&mut *w, &bad).is_err());
            drop(w);
            assert_eq!(encode(&*again.read().unwrap()).unwrap(), today);
        }
        let mut w = again.write().unwrap();
        let err = install_blob(&mut *w, &newer).unwrap_err();
        assert!(err.0.contains("format this build does not read"), "{err}");
    }

    #[test]
    fn a_batched_install_commits_as_it_goes_and_writes_the_same_records() {
        let from = MemEngine::default();
        let mut w = from.write().unwrap();
        for i in 0..100u32 {
            let k = format!("k{i:03}");
            w.put(
                Table::Key,
                k.as_bytes(),
                &key_record::seal(k.as_bytes(), &[1; 1000]),
            )
            .unwrap();
        }
        let format = key_record::FORMAT_CHECKSUMMED.to_be_bytes();
        w.put(Table::Meta, key_record::FORMAT_META_KEY, &format)
            .unwrap();
        w.commit().unwrap();
        let blob = encode(&*from.read().unwrap()).unwrap();

        let to = MemEngine::default();
        let mut begun = 0;
        let mut begin = || -> Result<Box<dyn WriteTxn + '_>, StorageError> {
            begun += 1;
            to.write()
        };
        install_blob_batched(&mut begin, &blob, 10_000).unwrap();
        assert!(begun >= 10, "committed as it went: {begun} transactions");
        assert_eq!(encode(&*to.read().unwrap()).unwrap(), blob);

        let mut begin = || to.write();
        let cut = &blob[..blob.len() - 1];
        assert!(install_blob_batched(&mut begin, cut, 10_000).is_err());
    }
}
