//! etcd 3.5's backend layout over our tables, both ways: the store replayed as etcd's buckets
//! (for the Snapshot RPC's file), and etcd's buckets read back as our tables (for
//! `actcd snapshot restore`).
//!
//! Our tables already hold etcd's records under etcd's bucket names; what differs is listed in
//! [`visit_etcd_layout`] and [`from_etcd_buckets`].

use actcd_proto::etcdserverpb::Member;
use actcd_proto::mvccpb::KeyValue;
use actcd_types::Revision;
use actcd_types::key_record;
use actcd_types::storage::{ReadTxn, Table, try_scan};
use prost::Message;

use crate::EtcdSnapshotError;
use crate::bolt::{Db, Item, ReadAt, Source};

/// `meta`'s compaction marks (etcd's names, and ours). We keep them as 8-byte big-endian
/// integers, etcd as 17-byte revisions.
pub const META_SCHEDULED_COMPACT: &[u8] = b"scheduledCompactRev";
pub const META_FINISHED_COMPACT: &[u8] = b"finishedCompactRev";

/// etcd 3.5's `cluster` bucket: the cluster version it records once all members run 3.5.
const CLUSTER_BUCKET: &[u8] = b"cluster";
const CLUSTER_VERSION: (&[u8], &[u8]) = (b"clusterVersion", b"3.5.0");
const CONF_STATE: &[u8] = b"confState";
const AUTH_REVISION: &[u8] = b"authRevision";

/// A record of one of our tables, with its own bytes.
pub type OwnedRecord = (Table, Vec<u8>, Vec<u8>);

fn is_compact_mark(k: &[u8]) -> bool {
    k == META_SCHEDULED_COMPACT || k == META_FINISHED_COMPACT
}

fn damaged(what: impl Into<String>) -> EtcdSnapshotError {
    EtcdSnapshotError::Layout(what.into())
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
fn member_json(m: &Member) -> Vec<u8> {
    let mut o = format!(
        "{{\"id\":{},\"peerURLs\":{}",
        m.id,
        json_strs(&m.peer_ur_ls)
    );
    if m.is_learner {
        o.push_str(",\"isLearner\":true");
    }
    if !m.name.is_empty() {
        o.push_str(&format!(",\"name\":{}", json_str(&m.name)));
    }
    if !m.client_ur_ls.is_empty() {
        o.push_str(&format!(",\"clientURLs\":{}", json_strs(&m.client_ur_ls)));
    }
    o.push('}');
    o.into_bytes()
}

fn decode_member(v: &[u8]) -> Result<Member, EtcdSnapshotError> {
    Member::decode(v).map_err(|e| damaged(format!("member record: {e}")))
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

type ItemFn<'f> = dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError> + 'f;

/// What one of our records becomes in etcd's layout.
enum AsEtcd {
    Same,
    Converted(Vec<u8>),
    /// `value` of ours, a part of etcd's record (a `key` record without its checksum).
    Part(std::ops::Range<usize>),
    /// Not one of etcd's (our `key` table's format version).
    Dropped,
}

/// A record in etcd's form.
type Convert = dyn Fn(&[u8], &[u8]) -> Result<AsEtcd, EtcdSnapshotError>;

/// Scans `table` into `f` with `added` (sorted) merged in by key; a key the table has keeps the
/// table's value. `convert` turns a record into etcd's form.
fn scan_merged(
    txn: &dyn ReadTxn,
    table: Table,
    added: &[(&[u8], Vec<u8>)],
    convert: &Convert,
    f: &mut ItemFn<'_>,
) -> Result<(), EtcdSnapshotError> {
    let mut next = 0;
    try_scan(txn, table, &mut |k, v| {
        while let Some((ak, av)) = added.get(next).filter(|(ak, _)| *ak < k) {
            f(Item::Pair(ak, av))?;
            next += 1;
        }
        if added.get(next).is_some_and(|(ak, _)| *ak == k) {
            next += 1;
        }
        match convert(k, v)? {
            AsEtcd::Same => f(Item::Pair(k, v)),
            AsEtcd::Converted(converted) => f(Item::Pair(k, &converted)),
            AsEtcd::Part(range) => f(Item::Pair(k, &v[range])),
            AsEtcd::Dropped => Ok(()),
        }
    })?;
    for (k, v) in &added[next..] {
        f(Item::Pair(k, v))?;
    }
    Ok(())
}

/// Replays the store, as `txn` sees it, as etcd 3.5's backend: buckets in name order, keys in
/// order, so etcd's tools (`etcdutl snapshot status`, `restore`) read a snapshot of ours like
/// one of their own. Members become etcd's JSON, the compaction marks 17-byte revisions, and
/// the `confState`, `authRevision` and `cluster` entries etcd keeps are added. Each call reads
/// the whole store again (a writer plans the file, then writes it).
pub fn visit_etcd_layout(txn: &dyn ReadTxn, f: &mut ItemFn<'_>) -> Result<(), EtcdSnapshotError> {
    let mut voters = Vec::new();
    let mut learners = Vec::new();
    try_scan(txn, Table::Members, &mut |_, v| {
        let m = decode_member(v)?;
        if m.is_learner {
            learners.push(m.id);
        } else {
            voters.push(m.id);
        }
        Ok::<(), EtcdSnapshotError>(())
    })?;
    let conf_state = conf_state_json(&voters, &learners);
    // The v2 store's table is ours, not one of etcd's buckets, and etcd's snapshot file does
    // not carry its v2 store either: it is left out (followers get it with the whole-store
    // blob, `whole_store.rs`).
    let mut names: Vec<&[u8]> = Table::ALL
        .iter()
        .filter(|t| **t != Table::V2)
        .map(|t| t.name().as_bytes())
        .collect();
    names.push(CLUSTER_BUCKET);
    names.sort();
    for name in names {
        f(Item::Bucket(name))?;
        if name == CLUSTER_BUCKET {
            f(Item::Pair(CLUSTER_VERSION.0, CLUSTER_VERSION.1))?;
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
                &|_, _| Ok(AsEtcd::Same),
                f,
            )?,
            Table::Meta => scan_merged(
                txn,
                table,
                &[(CONF_STATE, conf_state.clone())],
                &|k, v| {
                    if k == key_record::FORMAT_META_KEY {
                        return Ok(AsEtcd::Dropped);
                    }
                    if !is_compact_mark(k) {
                        return Ok(AsEtcd::Same);
                    }
                    let rev = <[u8; 8]>::try_from(v)
                        .map(i64::from_be_bytes)
                        .map_err(|_| damaged("a compaction mark is not 8 bytes"))?;
                    Ok(AsEtcd::Converted(
                        Revision { main: rev, sub: 0 }.to_bytes(false),
                    ))
                },
                f,
            )?,
            Table::Members => scan_merged(
                txn,
                table,
                &[],
                &|_, v| Ok(AsEtcd::Converted(member_json(&decode_member(v)?))),
                f,
            )?,
            // etcd's records are ours without the checksum, checked here so that a damaged
            // one fails the snapshot (naming it) instead of going out as good data.
            Table::Key => scan_merged(
                txn,
                table,
                &[],
                &|k, v| {
                    let kv = key_record::open(k, v)?;
                    Ok(AsEtcd::Part(v.len() - kv.len()..v.len()))
                },
                f,
            )?,
            _ => scan_merged(txn, table, &[], &|_, _| Ok(AsEtcd::Same), f)?,
        }
    }
    Ok(())
}

/// The store, through a read transaction, as a bbolt [`Source`] in etcd's layout.
pub struct EtcdLayout<'t>(pub &'t dyn ReadTxn);

impl Source for EtcdLayout<'_> {
    fn visit(
        &mut self,
        f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        visit_etcd_layout(self.0, f)
    }
}

/// Where a restore's records go, one at a time, borrowed for the call: table, key, value.
pub type RecordFn<'f> = dyn FnMut(Table, &[u8], &[u8]) -> Result<(), EtcdSnapshotError> + 'f;

/// etcd's buckets (ours, or etcd's own backend), as `source` replays them, as records of our
/// tables, handed to `sink` as they come, for restoring a snapshot into a new data dir: the key
/// space, leases, auth state and alarms are kept; membership is left out (a restore starts a
/// new cluster, as etcd's does), and so are the consistent index and term, which belong to the
/// old cluster's log. Buckets actcd does not keep (`cluster`, and anything unknown) are
/// dropped. Records come in the source's order, then the `key` table's format version last.
/// Nothing is kept between records: a [`bolt::Db`](crate::bolt::Db) over a file restores in
/// a page or two of memory. A record that is not what etcd keeps there ends it with an error,
/// after the records before it.
pub fn from_etcd_source(
    source: &mut dyn Source,
    sink: &mut RecordFn<'_>,
) -> Result<(), EtcdSnapshotError> {
    let mut table = None;
    source.visit(&mut |item| {
        match item {
            Item::Bucket(name) => {
                table = Table::ALL
                    .iter()
                    .copied()
                    .find(|t| t.name().as_bytes() == name)
                    .filter(|t| !matches!(t, Table::Members | Table::MembersRemoved));
            }
            Item::Pair(k, v) => match table {
                None => {}
                Some(Table::Meta) if is_compact_mark(k) => {
                    let (rev, _) = Revision::from_bytes(v)
                        .ok_or_else(|| damaged("a compaction mark is not a revision"))?;
                    sink(Table::Meta, k, &rev.main.to_be_bytes())?;
                }
                Some(Table::Meta) => {}
                Some(Table::Key) => {
                    // etcd's records (a tombstone holds only its key) with our checksum added;
                    // check them first, so a damaged file fails here, not at start.
                    Revision::from_bytes(k)
                        .ok_or_else(|| damaged("a key record is not at a revision"))?;
                    KeyValue::decode(v).map_err(|e| damaged(format!("key record: {e}")))?;
                    sink(Table::Key, k, &key_record::seal(k, v))?;
                }
                Some(t) => sink(t, k, v)?,
            },
        }
        Ok(())
    })?;
    sink(
        Table::Meta,
        key_record::FORMAT_META_KEY,
        &key_record::FORMAT_CHECKSUMMED.to_be_bytes(),
    )
}

impl<R: ReadAt> Db<R> {
    /// The file's buckets as records of our tables, handed to `sink` as they are read
    /// ([`from_etcd_source`]): what `actcd snapshot restore` writes.
    pub fn to_records(&mut self, sink: &mut RecordFn<'_>) -> Result<(), EtcdSnapshotError> {
        from_etcd_source(self, sink)
    }
}

/// Buckets held in memory, as a [`Source`].
struct InMemory<'a, N, K, V>(&'a [(N, Vec<(K, V)>)]);

impl<N, K, V> Source for InMemory<'_, N, K, V>
where
    N: AsRef<[u8]>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    fn visit(
        &mut self,
        f: &mut dyn FnMut(Item<'_>) -> Result<(), EtcdSnapshotError>,
    ) -> Result<(), EtcdSnapshotError> {
        for (name, pairs) in self.0 {
            f(Item::Bucket(name.as_ref()))?;
            for (k, v) in pairs {
                f(Item::Pair(k.as_ref(), v.as_ref()))?;
            }
        }
        Ok(())
    }
}

/// [`from_etcd_source`] over buckets held in memory, its records collected.
pub fn from_etcd_buckets<N, K, V>(
    buckets: &[(N, Vec<(K, V)>)],
) -> Result<Vec<OwnedRecord>, EtcdSnapshotError>
where
    N: AsRef<[u8]>,
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut out = Vec::new();
    from_etcd_source(&mut InMemory(buckets), &mut |t, k, v| {
        out.push((t, k.to_vec(), v.to_vec()));
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use actcd_types::storage::{KvEngine, MemEngine};

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
        let (at2, at3) = (r2.to_bytes(false), r3.to_bytes(true));
        w.put(Table::Key, &at2, &key_record::encode(&at2, &put))
            .unwrap();
        let tomb = KeyValue {
            key: b"a".to_vec(),
            ..Default::default()
        };
        w.put(Table::Key, &at3, &key_record::encode(&at3, &tomb))
            .unwrap();
        w.put(
            Table::Meta,
            key_record::FORMAT_META_KEY,
            &key_record::FORMAT_CHECKSUMMED.to_be_bytes(),
        )
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
                Item::Bucket(name) => buckets.push((name.to_vec(), Vec::new())),
                Item::Pair(k, v) => buckets
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
        // etcd's records: no checksum, no format version.
        assert_eq!(get("key", &at2).unwrap(), put.encode_to_vec());
        assert_eq!(get("key", &at3).unwrap(), tomb.encode_to_vec());
        assert_eq!(get("meta", key_record::FORMAT_META_KEY), None);

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
        // Sealed again, under the format that says so.
        assert!(back.contains(&(Table::Key, at2.clone(), key_record::encode(&at2, &put))));
        assert!(back.contains(&(Table::Key, at3.clone(), key_record::encode(&at3, &tomb))));
        assert!(back.contains(&(
            Table::Meta,
            key_record::FORMAT_META_KEY.to_vec(),
            key_record::FORMAT_CHECKSUMMED.to_be_bytes().to_vec()
        )));
        assert!(back.contains(&(Table::Lease, 7i64.to_be_bytes().to_vec(), b"lease".to_vec())));

        // Damage is an error.
        let bad = vec![(b"key".to_vec(), vec![(b"short".to_vec(), vec![])])];
        assert!(from_etcd_buckets(&bad).is_err());

        // A damaged record of ours never goes out.
        let mut w = from.write().unwrap();
        let mut stored = key_record::encode(&at2, &put);
        *stored.last_mut().unwrap() ^= 1;
        w.put(Table::Key, &at2, &stored).unwrap();
        w.commit().unwrap();
        let err = visit_etcd_layout(&*from.read().unwrap(), &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, EtcdSnapshotError::Damaged(_)), "{err}");
    }

    /// A restore's records come as the file's pages are read, each written as it comes: at
    /// every record little more has been read than handed over, and they are the records
    /// `from_etcd_buckets` makes of the whole file in memory, in the same order.
    #[test]
    fn records_come_as_the_file_is_read() {
        let kvs: Vec<(Vec<u8>, Vec<u8>)> = (2..3002i64)
            .map(|main| {
                let kv = KeyValue {
                    key: format!("k{main}").into_bytes(),
                    create_revision: main,
                    mod_revision: main,
                    version: 1,
                    value: vec![(main % 251) as u8; 200],
                    lease: 0,
                };
                (Revision::new(main, 0).to_bytes(false), kv.encode_to_vec())
            })
            .collect();
        let buckets = vec![
            (b"key".to_vec(), kvs),
            (
                b"lease".to_vec(),
                vec![(7i64.to_be_bytes().to_vec(), b"lease".to_vec())],
            ),
            (
                b"meta".to_vec(),
                vec![(
                    META_FINISHED_COMPACT.to_vec(),
                    Revision::new(2, 0).to_bytes(false),
                )],
            ),
        ];
        let file = crate::bolt::write(&buckets).unwrap();
        let want = from_etcd_buckets(&crate::bolt::read(&file).unwrap().buckets).unwrap();
        let src = crate::bolt::Counting {
            data: &file,
            ..Default::default()
        };
        let mut db = Db::open(&src).unwrap();
        let mut got = Vec::new();
        let mut handed = 0u64;
        let mut worst_ahead = 0u64;
        db.to_records(&mut |t, k, v| {
            handed += (k.len() + v.len()) as u64;
            worst_ahead = worst_ahead.max(src.read.get().saturating_sub(2 * handed));
            got.push((t, k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(got, want);
        assert_eq!(got.len(), 3000 + 3);
        assert!(file.len() > 150 * 4096);
        assert!(worst_ahead <= 8 * 4096, "read {worst_ahead} bytes ahead");
    }
}
