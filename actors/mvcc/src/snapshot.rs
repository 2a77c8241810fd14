//! The state machine as one blob, for a member too far behind for the log.
//!
//! The blob is engine-neutral: every record of every table, read in one read transaction (so
//! it is consistent, and covers exactly the consistent index stored in its `meta` table),
//! framed as `table (1 byte) · key length (u32 BE) · key · value length (u32 BE) · value`, after a
//! magic header. Installing it replaces every table's contents in one write transaction: a
//! crash leaves either the old state or the new one.

use actcd_proto::etcdserverpb::Member;
use actcd_proto::mvccpb::KeyValue;
use actcd_types::Revision;
use actcd_types::msg::MemberRecord;
use actcd_types::storage::{ReadTxn, StorageError, Table, WriteTxn, try_scan};
use prost::Message;

use crate::store::{META_FINISHED_COMPACT, META_SCHEDULED_COMPACT};

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
    for t in Table::ALL {
        let code = table_code(t);
        txn.scan(t, &[], None, &mut |k, v| {
            out.push(code);
            out.extend_from_slice(&(k.len() as u32).to_be_bytes());
            out.extend_from_slice(k);
            out.extend_from_slice(&(v.len() as u32).to_be_bytes());
            out.extend_from_slice(v);
            true
        })?;
    }
    Ok(out)
}

/// A record with its own bytes.
pub type OwnedRecord = (Table, Vec<u8>, Vec<u8>);

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
    let records = decode(data)?;
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
    for (t, k, v) in records {
        txn.put(t, k, v)?;
    }
    Ok(())
}

// ---- etcd's backend layout ------------------------------------------------------------------

/// etcd 3.5's `cluster` bucket: the cluster version it records once all members run 3.5.
const CLUSTER_BUCKET: &[u8] = b"cluster";
const CLUSTER_VERSION: (&[u8], &[u8]) = (b"clusterVersion", b"3.5.0");
const CONF_STATE: &[u8] = b"confState";
const AUTH_REVISION: &[u8] = b"authRevision";

fn is_compact_mark(k: &[u8]) -> bool {
    k == META_SCHEDULED_COMPACT || k == META_FINISHED_COMPACT
}

/// A JSON string, escaped.
fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn json_strs(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| json_str(s)).collect();
    format!("[{}]", items.join(","))
}

fn json_ids(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(u64::to_string).collect();
    format!("[{}]", items.join(","))
}

/// A member record as etcd's backend keeps it: JSON of the id, raft attributes and
/// attributes, in etcd's field order, empty optional fields left out.
fn member_json(m: &MemberRecord) -> Vec<u8> {
    let mut o = format!("{{\"id\":{},\"peerURLs\":{}", m.id, json_strs(&m.peer_urls));
    if m.is_learner {
        o.push_str(",\"isLearner\":true");
    }
    if !m.name.is_empty() {
        o.push_str(&format!(",\"name\":{}", json_str(&m.name)));
    }
    if !m.client_urls.is_empty() {
        o.push_str(&format!(",\"clientURLs\":{}", json_strs(&m.client_urls)));
    }
    o.push('}');
    o.into_bytes()
}

/// raft's configuration as etcd records it in `meta`/`confState`.
fn conf_state_json(voters: &[u64], learners: &[u64]) -> Vec<u8> {
    let mut o = format!("{{\"voters\":{}", json_ids(voters));
    if !learners.is_empty() {
        o.push_str(&format!(",\"learners\":{}", json_ids(learners)));
    }
    o.push_str(",\"auto_leave\":false}");
    o.into_bytes()
}

/// One item of etcd's layout, in bbolt's order: a bucket, then each of its pairs.
pub enum EtcdItem<'a> {
    Bucket(&'a [u8]),
    Pair(&'a [u8], &'a [u8]),
}

type ItemFn<'f> = dyn FnMut(EtcdItem<'_>) -> Result<(), StorageError> + 'f;

/// A record in etcd's form, if it differs from ours.
type Convert = dyn Fn(&[u8], &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

/// Scans `table` into `f` with `added` (sorted) merged in by key; a key the table has keeps the
/// table's value. `convert` turns a record into etcd's form.
fn scan_merged(
    txn: &dyn ReadTxn,
    table: Table,
    added: &[(&[u8], Vec<u8>)],
    convert: &Convert,
    f: &mut ItemFn<'_>,
) -> Result<(), StorageError> {
    let mut next = 0;
    try_scan(txn, table, &mut |k, v| {
        while let Some((ak, av)) = added.get(next).filter(|(ak, _)| *ak < k) {
            f(EtcdItem::Pair(ak, av))?;
            next += 1;
        }
        if added.get(next).is_some_and(|(ak, _)| *ak == k) {
            next += 1;
        }
        match convert(k, v)? {
            Some(converted) => f(EtcdItem::Pair(k, &converted)),
            None => f(EtcdItem::Pair(k, v)),
        }
    })?;
    for (k, v) in &added[next..] {
        f(EtcdItem::Pair(k, v))?;
    }
    Ok(())
}

/// Replays the store, as `txn` sees it, as etcd 3.5's backend: buckets in name order, keys in
/// order, so etcd's tools (`etcdutl snapshot status`, `restore`) read a snapshot of ours like
/// one of their own. Members become etcd's JSON, the compaction marks 17-byte revisions, and
/// the `confState`, `authRevision` and `cluster` entries etcd keeps are added. Each call reads
/// the whole store again (a writer plans the file, then writes it).
pub fn visit_etcd_layout(txn: &dyn ReadTxn, f: &mut ItemFn<'_>) -> Result<(), StorageError> {
    let mut voters = Vec::new();
    let mut learners = Vec::new();
    try_scan(txn, Table::Members, &mut |_, v| {
        let m =
            Member::decode(v).map_err(|e| StorageError(format!("snapshot: member record: {e}")))?;
        if m.is_learner {
            learners.push(m.id);
        } else {
            voters.push(m.id);
        }
        Ok::<(), StorageError>(())
    })?;
    let conf_state = conf_state_json(&voters, &learners);
    let mut names: Vec<&[u8]> = Table::ALL.iter().map(|t| t.name().as_bytes()).collect();
    names.push(CLUSTER_BUCKET);
    names.sort();
    for name in names {
        f(EtcdItem::Bucket(name))?;
        if name == CLUSTER_BUCKET {
            f(EtcdItem::Pair(CLUSTER_VERSION.0, CLUSTER_VERSION.1))?;
            continue;
        }
        let Some(table) = Table::ALL
            .iter()
            .copied()
            .find(|t| t.name().as_bytes() == name)
        else {
            continue;
        };
        match table {
            // etcd writes the auth revision (1) when it first starts; ours is implied until
            // auth changes.
            Table::Auth => scan_merged(
                txn,
                table,
                &[(AUTH_REVISION, 1u64.to_be_bytes().to_vec())],
                &|_, _| Ok(None),
                f,
            )?,
            Table::Meta => scan_merged(
                txn,
                table,
                &[(CONF_STATE, conf_state.clone())],
                &|k, v| {
                    if !is_compact_mark(k) {
                        return Ok(None);
                    }
                    let rev = <[u8; 8]>::try_from(v)
                        .map(i64::from_be_bytes)
                        .map_err(|_| {
                            StorageError("snapshot: a compaction mark is not 8 bytes".into())
                        })?;
                    Ok(Some(Revision { main: rev, sub: 0 }.to_bytes(false)))
                },
                f,
            )?,
            Table::Members => scan_merged(
                txn,
                table,
                &[],
                &|_, v| {
                    let m = Member::decode(v)
                        .map_err(|e| StorageError(format!("snapshot: member record: {e}")))?;
                    Ok(Some(member_json(&crate::members::record_from_pb(m))))
                },
                f,
            )?,
            _ => scan_merged(txn, table, &[], &|_, _| Ok(None), f)?,
        }
    }
    Ok(())
}

/// etcd's buckets (ours, or etcd's own backend) as records of our tables, for restoring a
/// snapshot into a new data dir: the key space, leases, auth state and alarms are kept;
/// membership is left out (a restore starts a new cluster, as etcd's does), and so are the
/// consistent index and term, which belong to the old cluster's log. Buckets actcd does not
/// keep (`cluster`, and anything unknown) are dropped.
pub fn from_etcd_buckets<N, K, V>(
    buckets: &[(N, Vec<(K, V)>)],
) -> Result<Vec<OwnedRecord>, StorageError>
where
    N: AsRef<[u8]>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut out = Vec::new();
    for (name, pairs) in buckets {
        let name = name.as_ref();
        let Some(t) = Table::ALL
            .iter()
            .copied()
            .find(|t| t.name().as_bytes() == name)
        else {
            continue;
        };
        if matches!(t, Table::Members | Table::MembersRemoved) {
            continue;
        }
        for (k, v) in pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            let v = match t {
                Table::Meta if is_compact_mark(k) => {
                    let (rev, _) = Revision::from_bytes(v).ok_or_else(|| {
                        StorageError("snapshot: a compaction mark is not a revision".into())
                    })?;
                    rev.main.to_be_bytes().to_vec()
                }
                Table::Meta => continue,
                Table::Key => {
                    // Both sides keep etcd's records (a tombstone holds only its key), so they
                    // go over unchanged; check them, so a damaged file fails here, not at start.
                    Revision::from_bytes(k).ok_or_else(|| {
                        StorageError("snapshot: a key record is not at a revision".into())
                    })?;
                    KeyValue::decode(v)
                        .map_err(|e| StorageError(format!("snapshot: key record: {e}")))?;
                    v.to_vec()
                }
                _ => v.to_vec(),
            };
            out.push((t, k.to_vec(), v));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_types::storage::{KvEngine, MemEngine};

    #[test]
    fn a_snapshot_replaces_everything_and_refuses_damage() {
        let from = MemEngine::default();
        let mut w = from.write().unwrap();
        w.put(Table::Key, b"k1", b"v1").unwrap();
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
    }

    #[test]
    fn etcd_layout_round_trip_keeps_data_and_drops_identity() {
        let from = MemEngine::default();
        let mut w = from.write().unwrap();
        let put = KeyValue {
            key: b"a".to_vec(),
            create_revision: 2,
            mod_revision: 2,
            version: 1,
            value: b"1".to_vec(),
            lease: 0,
        };
        let r2 = Revision { main: 2, sub: 0 };
        let r3 = Revision { main: 3, sub: 0 };
        w.put(Table::Key, &r2.to_bytes(false), &put.encode_to_vec())
            .unwrap();
        let tomb = KeyValue {
            key: b"a".to_vec(),
            ..Default::default()
        };
        w.put(Table::Key, &r3.to_bytes(true), &tomb.encode_to_vec())
            .unwrap();
        w.put(Table::Meta, b"consistent_index", &9u64.to_be_bytes())
            .unwrap();
        w.put(Table::Meta, META_FINISHED_COMPACT, &2i64.to_be_bytes())
            .unwrap();
        let m = Member {
            id: 0xabc,
            name: "n\"1".into(),
            peer_ur_ls: vec!["http://p:1".into()],
            client_ur_ls: vec![],
            is_learner: true,
        };
        w.put(Table::Members, b"abc", &m.encode_to_vec()).unwrap();
        w.put(Table::Lease, &7i64.to_be_bytes(), b"lease").unwrap();
        w.commit().unwrap();
        // The layout as a writer sees it: buckets in name order, each with its pairs.
        type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
        let mut buckets: Vec<(Vec<u8>, Pairs)> = Vec::new();
        visit_etcd_layout(&*from.read().unwrap(), &mut |item| {
            match item {
                EtcdItem::Bucket(name) => buckets.push((name.to_vec(), Vec::new())),
                EtcdItem::Pair(k, v) => buckets
                    .last_mut()
                    .expect("a bucket first")
                    .1
                    .push((k.to_vec(), v.to_vec())),
            }
            Ok(())
        })
        .unwrap();
        let names: Vec<&[u8]> = buckets.iter().map(|b| b.0.as_slice()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "buckets in name order");
        for (name, pairs) in &buckets {
            assert!(
                pairs.windows(2).all(|w| w[0].0 < w[1].0),
                "{} in key order",
                String::from_utf8_lossy(name)
            );
        }
        let get = |b: &str, k: &[u8]| {
            buckets
                .iter()
                .find(|x| x.0 == b.as_bytes())
                .and_then(|x| x.1.iter().find(|p| p.0 == k))
                .map(|p| p.1.clone())
        };
        assert_eq!(
            get("members", b"abc").unwrap(),
            br#"{"id":2748,"peerURLs":["http://p:1"],"isLearner":true,"name":"n\"1"}"#.to_vec()
        );
        assert_eq!(
            get("meta", b"confState").unwrap(),
            br#"{"voters":[],"learners":[2748],"auto_leave":false}"#.to_vec()
        );
        assert_eq!(
            get("meta", META_FINISHED_COMPACT).unwrap(),
            r2.to_bytes(false)
        );
        assert_eq!(
            get("auth", AUTH_REVISION).unwrap(),
            1u64.to_be_bytes().to_vec()
        );
        assert_eq!(
            get("cluster", b"clusterVersion").unwrap(),
            b"3.5.0".to_vec()
        );

        // Back: data kept, membership and the old log's position gone, marks as ours again.
        let mut back = from_etcd_buckets(&buckets).unwrap();
        back.sort();
        let tables: Vec<Table> = back.iter().map(|r| r.0).collect();
        assert!(!tables.contains(&Table::Members));
        assert!(!back.iter().any(|r| r.1 == b"consistent_index"));
        assert!(back.contains(&(
            Table::Meta,
            META_FINISHED_COMPACT.to_vec(),
            2i64.to_be_bytes().to_vec()
        )));
        assert!(back.contains(&(Table::Key, r2.to_bytes(false), put.encode_to_vec())));
        assert!(back.contains(&(Table::Key, r3.to_bytes(true), tomb.encode_to_vec())));
        assert!(back.contains(&(Table::Lease, 7i64.to_be_bytes().to_vec(), b"lease".to_vec())));

        // Damage is an error.
        let bad = vec![(b"key".to_vec(), vec![(b"short".to_vec(), vec![])])];
        assert!(from_etcd_buckets(&bad).is_err());
    }
}
