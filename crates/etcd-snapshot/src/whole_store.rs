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
    out.extend_from_slice(MAGIC);
    let mut damaged = None;
    for t in Table::ALL {
        let code = table_code(t);
        txn.scan(t, &[], None, &mut |k, v| {
            if t == Table::Key
                && let Err(d) = key_record::open(k, v)
            {
                damaged = Some(d);
                return false;
            }
            out.push(code);
            out.extend_from_slice(&(k.len() as u32).to_be_bytes());
            out.extend_from_slice(k);
            out.extend_from_slice(&(v.len() as u32).to_be_bytes());
            out.extend_from_slice(v);
            true
        })?;
        if let Some(d) = damaged {
            return Err(StorageError(format!("snapshot not made: {d}")));
        }
    }
    Ok(out)
}

/// One record of a blob: its table, key and value.
pub type Record<'a> = (Table, &'a [u8], &'a [u8]);

/// The records of a blob, checked to be whole before anything is written.
pub fn decode(data: &[u8]) -> Result<Vec<Record<'_>>, StorageError> {
    let bad = |what: &str| StorageError(format!("snapshot: {what}"));
    let mut rest = data
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("not an actcd snapshot"))?;
    let mut records = Vec::new();
    let take_len = |rest: &mut &[u8]| -> Result<usize, StorageError> {
        let (n, tail) = rest.split_at_checked(4).ok_or_else(|| bad("truncated"))?;
        *rest = tail;
        Ok(u32::from_be_bytes([n[0], n[1], n[2], n[3]]) as usize)
    };
    while let Some((&code, tail)) = rest.split_first() {
        rest = tail;
        let table = *Table::ALL
            .get(code as usize)
            .ok_or_else(|| bad("unknown table"))?;
        let klen = take_len(&mut rest)?;
        let (k, tail) = rest
            .split_at_checked(klen)
            .ok_or_else(|| bad("truncated"))?;
        rest = tail;
        let vlen = take_len(&mut rest)?;
        let (v, tail) = rest
            .split_at_checked(vlen)
            .ok_or_else(|| bad("truncated"))?;
        rest = tail;
        records.push((table, k, v));
    }
    Ok(records)
}

/// Replaces every table's contents with the blob's records, inside `txn`.
pub fn install<W: WriteTxn + ?Sized>(txn: &mut W, data: &[u8]) -> Result<(), StorageError> {
    install_records(txn, &decode(data)?)
}

/// Replaces every table's contents with `records`, inside `txn`.
pub fn install_records<W: WriteTxn + ?Sized>(
    txn: &mut W,
    records: &[Record<'_>],
) -> Result<(), StorageError> {
    for t in Table::ALL {
        let mut keys = Vec::new();
        txn.scan(t, &[], None, &mut |k, _| {
            keys.push(k.to_vec());
            true
        })?;
        for k in keys {
            txn.delete(t, &k)?;
        }
    }
    for &(t, k, v) in records {
        txn.put(t, k, v)?;
    }
    Ok(())
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
        w.put(Table::Members, b"1", b"").unwrap();
        w.commit().unwrap();
        let blob = encode(&*from.read().unwrap()).unwrap();

        let to = MemEngine::default();
        let mut w = to.write().unwrap();
        w.put(Table::Key, b"stale", b"x").unwrap();
        w.put(Table::Alarm, b"a", b"x").unwrap();
        w.commit().unwrap();
        let mut w = to.write().unwrap();
        install(&mut *w, &blob).unwrap();
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
}
