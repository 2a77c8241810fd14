use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use actcd_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::request_op::Request;
use actcd_proto::etcdserverpb::response_op::Response;
use actcd_proto::etcdserverpb::{
    Compare, DeleteRangeResponse, PutResponse, RequestOp, ResponseOp, TxnResponse,
};
use actcd_types::storage::{MemEngine, ScanFn, StorageError, StorageResult};

use super::*;
use crate::test_requests::compact;

// ------------------------------------------------------------------ test engine

/// A `MemEngine` that counts record reads of `key` in read transactions and can be told to fail
/// every commit.
#[derive(Clone, Default)]
struct TestEngine {
    mem: MemEngine,
    fail_commit: Arc<AtomicBool>,
    key_reads: Arc<AtomicUsize>,
    /// Calls of `release_scanned_pages`.
    releases: Arc<AtomicUsize>,
}

/// A read transaction that counts the `key` records read through it (borrowed or owned: the
/// transaction and the counter are anything that derefs to them).
struct CountingRead<R, N> {
    inner: R,
    key_reads: N,
}

impl<R, N> ReadTxn for CountingRead<R, N>
where
    R: std::ops::Deref,
    R::Target: ReadTxn,
    N: std::ops::Deref<Target = AtomicUsize>,
{
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        if table == Table::Key {
            self.key_reads.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get(table, key)
    }
    fn scan(
        &self,
        t: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        self.inner.scan(t, from, to, f)
    }
}

struct FlakyWrite<'a> {
    inner: Box<dyn WriteTxn + 'a>,
    fail: bool,
}

impl ReadTxn for FlakyWrite<'_> {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        self.inner.get(table, key)
    }
    fn scan(
        &self,
        t: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        self.inner.scan(t, from, to, f)
    }
}

impl WriteTxn for FlakyWrite<'_> {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        self.inner.put(table, key, value)
    }
    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        self.inner.delete(table, key)
    }
    fn commit(self: Box<Self>) -> StorageResult<()> {
        if self.fail {
            return Err(StorageError("injected commit failure".into()));
        }
        self.inner.commit()
    }
}

/// Reads through the store's write buffer are counted too.
impl ReadEngine for TestEngine {
    fn begin_read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        KvEngine::read(self)
    }
    fn begin_read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Ok(Box::new(CountingRead {
            inner: Arc::new(self.mem.clone()).read_owned()?,
            key_reads: self.key_reads.clone(),
        }))
    }
    fn usage(&self) -> StorageResult<(u64, u64)> {
        self.mem.size()
    }
    fn release_scanned_pages(&self) {
        self.releases.fetch_add(1, Ordering::Relaxed);
    }
}

impl KvEngine for TestEngine {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(CountingRead {
            inner: self.mem.read()?,
            key_reads: &*self.key_reads,
        }))
    }
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>> {
        let fail = self.fail_commit.load(Ordering::Relaxed);
        Ok(Box::new(FlakyWrite {
            inner: self.mem.write()?,
            fail,
        }))
    }
    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Arc::new(self.mem.clone()).read_owned()
    }
    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>> {
        let fail = self.fail_commit.load(Ordering::Relaxed);
        Ok(Box::new(FlakyWrite {
            inner: Arc::new(self.mem.clone()).write_owned()?,
            fail,
        }))
    }
    fn sync(&self) -> StorageResult<()> {
        self.mem.sync()
    }
    fn size(&self) -> StorageResult<(u64, u64)> {
        self.mem.size()
    }
}

// ------------------------------------------------------------------ harness

const ID: MemberIdentity = MemberIdentity {
    cluster_id: 0xc1,
    member_id: 0x3e,
};
const TERM: u64 = 7;

struct Harness {
    engine: TestEngine,
    store: Store,
    applied: u64,
    /// The leases that exist (the applier's say, handed to every batch).
    leases: Vec<i64>,
    /// The lease changes the batches reported, oldest first.
    attached: Vec<LeaseAttachment>,
}

impl Harness {
    fn new() -> Self {
        let engine = TestEngine::default();
        let store = Store::open(Arc::new(engine.clone()), ID).unwrap();
        Self {
            engine,
            store,
            applied: 0,
            leases: Vec::new(),
            attached: Vec::new(),
        }
    }

    fn apply(&mut self, reqs: Vec<InternalRaftRequest>) -> Vec<ApplyResult> {
        self.applied += 1;
        let (results, attached) = self
            .store
            .apply_batch_with(self.applied, TERM, reqs, &self.leases)
            .expect("batch applies");
        self.attached.extend(attached);
        results
    }

    /// Deletes `keys` at one revision, as a lease revoke does, and commits.
    fn delete_keys(&mut self, keys: &[&str]) -> ApplyResult {
        self.applied += 1;
        let keys = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let (mut results, attached) = self
            .store
            .delete_keys_deferred(self.applied, TERM, keys, Vec::new())
            .expect("deletes apply");
        self.store.commit().expect("commits");
        self.attached.extend(attached);
        results.remove(0)
    }

    fn one(&mut self, req: InternalRaftRequest) -> ApplyResult {
        self.apply(vec![req]).remove(0)
    }

    fn take_outbox_events(&mut self) {
        self.store.take_outbox();
    }

    /// Lease `id` exists from now on (the applier grants leases; the store only hears which
    /// exist).
    fn grant(&mut self, id: i64) {
        self.leases.push(id);
    }

    fn put(&mut self, k: &str, v: &str) -> i64 {
        match self.one(put(k, v)) {
            Ok(ApplyResponse::Put(r)) => r.header.unwrap().revision,
            other => panic!("put {k}: {other:?}"),
        }
    }

    fn delete(&mut self, k: &str, end: &str) -> DeleteRangeResponse {
        match self.one(del(k, end)) {
            Ok(ApplyResponse::DeleteRange(r)) => r,
            other => panic!("delete {k}: {other:?}"),
        }
    }

    fn txn(&mut self, t: TxnRequest) -> Result<TxnResponse, EtcdError> {
        match self.one(txn(t)) {
            Ok(ApplyResponse::Txn(r)) => Ok(r),
            Ok(other) => panic!("txn answered {other:?}"),
            Err(e) => Err(e),
        }
    }

    fn compact(&mut self, rev: i64) -> ApplyResult {
        self.one(compact(rev))
    }

    fn range(&self, req: RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.store.range(&req)
    }

    fn get(&self, k: &str) -> Option<KeyValue> {
        self.range(rr(k, "")).unwrap().kvs.pop()
    }

    fn reopen(&self) -> Store {
        Store::open(Arc::new(self.engine.clone()), ID).unwrap()
    }

    /// Every record in the `key` table: (main, sub, tombstone).
    fn records(&self) -> Vec<(i64, i64, bool)> {
        let txn = self.engine.mem.read().unwrap();
        let mut out = vec![];
        txn.scan(Table::Key, &[], None, &mut |k, _| {
            let (r, t) = Revision::from_bytes(k).unwrap();
            out.push((r.main, r.sub, t));
            true
        })
        .unwrap();
        out
    }

    fn meta(&self, key: &[u8]) -> Option<u64> {
        read_meta(&*self.engine.mem.read().unwrap(), key).unwrap()
    }

    /// Everything observable about the store's memory.
    fn snapshot(&self) -> (i64, i64, u64, u64, Fingerprint) {
        let s = &self.store;
        (
            s.current_revision(),
            s.compact_revision(),
            s.consistent_index(),
            s.term(),
            fingerprint(s),
        )
    }
}

/// Per key, per generation: (created main, version, revisions).
type Fingerprint = Vec<(Vec<u8>, Vec<(i64, i64, Vec<Revision>)>)>;

fn fingerprint(s: &Store) -> Fingerprint {
    s.index()
        .iter()
        .map(|(k, ki)| {
            let gens = ki
                .generations()
                .iter()
                .map(|g| (g.created().main, g.version(), g.revisions().to_vec()))
                .collect();
            (k.to_vec(), gens)
        })
        .collect()
}

fn put_req(k: &str, v: &str) -> PutRequest {
    PutRequest {
        key: k.into(),
        value: v.into(),
        ..Default::default()
    }
}

fn rr(k: &str, end: &str) -> RangeRequest {
    RangeRequest {
        key: k.into(),
        range_end: end.into(),
        ..Default::default()
    }
}

fn put(k: &str, v: &str) -> InternalRaftRequest {
    InternalRaftRequest {
        put: Some(put_req(k, v)),
        ..Default::default()
    }
}

fn put_with(p: PutRequest) -> InternalRaftRequest {
    InternalRaftRequest {
        put: Some(p),
        ..Default::default()
    }
}

fn del(k: &str, end: &str) -> InternalRaftRequest {
    let d = DeleteRangeRequest {
        key: k.into(),
        range_end: end.into(),
        prev_kv: false,
    };
    InternalRaftRequest {
        delete_range: Some(d),
        ..Default::default()
    }
}

fn txn(t: TxnRequest) -> InternalRaftRequest {
    InternalRaftRequest {
        txn: Some(t),
        ..Default::default()
    }
}

fn op(r: Request) -> RequestOp {
    RequestOp { request: Some(r) }
}

fn op_put(k: &str, v: &str) -> RequestOp {
    op(Request::RequestPut(put_req(k, v)))
}

fn op_range(r: RangeRequest) -> RequestOp {
    op(Request::RequestRange(r))
}

fn op_del(k: &str, end: &str) -> RequestOp {
    op(Request::RequestDeleteRange(DeleteRangeRequest {
        key: k.into(),
        range_end: end.into(),
        prev_kv: false,
    }))
}

fn cmp(
    key: &str,
    end: &str,
    target: CompareTarget,
    result: CompareResult,
    u: TargetUnion,
) -> Compare {
    Compare {
        result: result as i32,
        target: target as i32,
        key: key.into(),
        target_union: Some(u),
        range_end: end.into(),
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<String> {
    kvs.iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
        .collect()
}

fn full_header(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        cluster_id: ID.cluster_id,
        member_id: ID.member_id,
        revision,
        raft_term: TERM,
    })
}

// ------------------------------------------------------------------ put / delete

#[test]
fn puts_and_deletes_set_versions_and_revisions() {
    struct Step {
        name: &'static str,
        req: InternalRaftRequest,
        want_header_rev: i64,
        /// `foo` afterwards: (create, mod, version, value).
        want_foo: Option<(i64, i64, i64, &'static str)>,
    }
    let steps = [
        Step {
            name: "create",
            req: put("foo", "a"),
            want_header_rev: 2,
            want_foo: Some((2, 2, 1, "a")),
        },
        Step {
            name: "update",
            req: put("foo", "b"),
            want_header_rev: 3,
            want_foo: Some((2, 3, 2, "b")),
        },
        Step {
            name: "other key",
            req: put("bar", "x"),
            want_header_rev: 4,
            want_foo: Some((2, 3, 2, "b")),
        },
        Step {
            name: "delete",
            req: del("foo", ""),
            want_header_rev: 5,
            want_foo: None,
        },
        Step {
            name: "delete nothing keeps revision",
            req: del("foo", ""),
            want_header_rev: 5,
            want_foo: None,
        },
        Step {
            name: "new generation",
            req: put("foo", "c"),
            want_header_rev: 6,
            want_foo: Some((6, 6, 1, "c")),
        },
    ];
    let mut h = Harness::new();
    assert_eq!(
        h.store.current_revision(),
        1,
        "an empty store is at revision 1"
    );
    for s in steps {
        let header = match h.one(s.req).unwrap() {
            ApplyResponse::Put(r) => r.header,
            ApplyResponse::DeleteRange(r) => r.header,
            other => panic!("{other:?}"),
        };
        assert_eq!(header, full_header(s.want_header_rev), "{}", s.name);
        assert_eq!(h.store.current_revision(), s.want_header_rev, "{}", s.name);
        let got = h
            .get("foo")
            .map(|kv| (kv.create_revision, kv.mod_revision, kv.version, kv.value));
        let want = s
            .want_foo
            .map(|(c, m, v, val)| (c, m, v, val.as_bytes().to_vec()));
        assert_eq!(got, want, "{}", s.name);
    }
}

#[test]
fn put_options_prev_kv_ignore_value_ignore_lease() {
    struct Case {
        name: &'static str,
        req: PutRequest,
        want: Result<(), EtcdError>,
        want_value: &'static str,
        want_lease: i64,
        want_prev: Option<&'static str>,
    }
    let base = |f: fn(&mut PutRequest)| {
        let mut p = put_req("k", "new");
        f(&mut p);
        p
    };
    let cases = [
        Case {
            name: "prev_kv",
            req: base(|p| p.prev_kv = true),
            want: Ok(()),
            want_value: "new",
            want_lease: 0,
            want_prev: Some("old"),
        },
        Case {
            name: "ignore_value keeps the value",
            req: base(|p| {
                p.value.clear();
                p.ignore_value = true;
            }),
            want: Ok(()),
            want_value: "old",
            want_lease: 0,
            want_prev: None,
        },
        Case {
            name: "ignore_lease keeps the lease",
            req: base(|p| p.ignore_lease = true),
            want: Ok(()),
            want_value: "new",
            want_lease: 9,
            want_prev: None,
        },
        Case {
            name: "ignore_value on a missing key",
            req: PutRequest {
                key: b"missing".to_vec(),
                ignore_value: true,
                ..Default::default()
            },
            want: Err(EtcdError::KeyNotFound),
            want_value: "old",
            want_lease: 9,
            want_prev: None,
        },
        Case {
            name: "ignore_lease on a missing key",
            req: PutRequest {
                key: b"missing".to_vec(),
                ignore_lease: true,
                ..Default::default()
            },
            want: Err(EtcdError::KeyNotFound),
            want_value: "old",
            want_lease: 9,
            want_prev: None,
        },
        Case {
            name: "unknown lease",
            req: base(|p| p.lease = 10),
            want: Err(EtcdError::LeaseNotFound),
            want_value: "old",
            want_lease: 9,
            want_prev: None,
        },
    ];
    for c in cases {
        let mut h = Harness::new();
        h.grant(9);
        h.one(put_with(PutRequest {
            lease: 9,
            ..put_req("k", "old")
        }))
        .unwrap();
        let before = h.snapshot();
        let got = h.one(put_with(c.req));
        match (&got, &c.want) {
            (Ok(ApplyResponse::Put(r)), Ok(())) => {
                let prev = r
                    .prev_kv
                    .as_ref()
                    .map(|kv| String::from_utf8_lossy(&kv.value).into_owned());
                assert_eq!(prev.as_deref(), c.want_prev, "{}: prev", c.name);
                assert_eq!(r.header, full_header(3), "{}", c.name);
            }
            (Err(e), Err(want)) => {
                assert_eq!(e, want, "{}", c.name);
                let (rev, compact, _, _, index) = h.snapshot();
                assert_eq!(
                    (rev, compact, index),
                    (before.0, before.1, before.4),
                    "{}: unchanged",
                    c.name
                );
            }
            _ => panic!("{}: got {got:?}", c.name),
        }
        let kv = h.get("k").unwrap();
        assert_eq!(
            (kv.value.as_slice(), kv.lease),
            (c.want_value.as_bytes(), c.want_lease),
            "{}",
            c.name
        );
    }
}

#[test]
fn lease_not_found_changes_nothing_until_the_lease_is_granted() {
    let mut h = Harness::new();
    let before = h.snapshot();
    let records = h.records();
    let got = h.one(put_with(PutRequest {
        lease: 5,
        ..put_req("k", "v")
    }));
    assert_eq!(got, Err(EtcdError::LeaseNotFound));
    let after = h.snapshot();
    assert_eq!((after.0, after.4), (before.0, before.4));
    assert_eq!(h.records(), records);
    h.grant(5);
    h.one(put_with(PutRequest {
        lease: 5,
        ..put_req("k", "v")
    }))
    .unwrap();
    assert_eq!(h.get("k").unwrap().lease, 5);
}

#[test]
fn delete_range_returns_prev_kvs_and_writes_tombstones() {
    let mut h = Harness::new();
    for k in ["a", "b/1", "b/2", "c"] {
        h.put(k, &format!("v-{k}"));
    }
    let d = DeleteRangeRequest {
        key: b"b".to_vec(),
        range_end: b"c".to_vec(),
        prev_kv: true,
    };
    let resp = match h.one(InternalRaftRequest {
        delete_range: Some(d),
        ..Default::default()
    }) {
        Ok(ApplyResponse::DeleteRange(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(resp.deleted, 2);
    assert_eq!(resp.header, full_header(6));
    assert_eq!(keys(&resp.prev_kvs), ["b/1", "b/2"]);
    assert_eq!(resp.prev_kvs[1].value, b"v-b/2");
    assert_eq!(&h.records()[4..], [(6, 0, true), (6, 1, true)]);
    let at = Revision::new(6, 1).to_bytes(true);
    let tomb = h.engine.mem.read().unwrap().get(Table::Key, &at).unwrap();
    let tomb = actcd_types::key_record::decode(&at, &tomb.unwrap()).unwrap();
    assert_eq!(
        tomb,
        // etcd's tombstone value: the key alone (the revision is the record's key).
        KeyValue {
            key: b"b/2".to_vec(),
            ..Default::default()
        }
    );
    // Deleting nothing doesn't take a revision.
    let none = h.delete("zzz", "");
    assert_eq!((none.deleted, none.header), (0, full_header(6)));
}

// ------------------------------------------------------------------ range

fn range_fixture() -> Harness {
    let mut h = Harness::new();
    for k in ["a", "b", "b/1", "b/2", "c", "d"] {
        h.put(k, k);
    }
    h
}

#[test]
fn ranges_follow_key_range_rules() {
    struct Case {
        name: &'static str,
        key: &'static str,
        range_end: &'static str,
        want: &'static [&'static str],
    }
    let cases = [
        Case {
            name: "single",
            key: "b",
            range_end: "",
            want: &["b"],
        },
        Case {
            name: "single missing",
            key: "bb",
            range_end: "",
            want: &[],
        },
        Case {
            name: "range end",
            key: "b",
            range_end: "c",
            want: &["b", "b/1", "b/2"],
        },
        Case {
            name: "prefix",
            key: "b/",
            range_end: "b0",
            want: &["b/1", "b/2"],
        },
        Case {
            name: "from key",
            key: "c",
            range_end: "\0",
            want: &["c", "d"],
        },
        Case {
            name: "all keys",
            key: "\0",
            range_end: "\0",
            want: &["a", "b", "b/1", "b/2", "c", "d"],
        },
        Case {
            name: "inverted",
            key: "d",
            range_end: "a",
            want: &[],
        },
    ];
    let h = range_fixture();
    for c in cases {
        let resp = h.range(rr(c.key, c.range_end)).unwrap();
        assert_eq!(keys(&resp.kvs), c.want, "{}", c.name);
        assert_eq!(resp.count, c.want.len() as i64, "{}: count", c.name);
        assert!(!resp.more, "{}", c.name);
        assert_eq!(
            resp.header,
            Some(ResponseHeader {
                raft_term: TERM,
                ..full_header(7).unwrap()
            })
        );
    }
}

#[test]
fn limit_sets_more_and_count_counts_everything() {
    struct Case {
        name: &'static str,
        req: RangeRequest,
        want: &'static [&'static str],
        want_more: bool,
        want_count: i64,
    }
    let all = || rr("\0", "\0");
    let cases = [
        Case {
            name: "no limit",
            req: all(),
            want: &["a", "b", "b/1", "b/2", "c", "d"],
            want_more: false,
            want_count: 6,
        },
        Case {
            name: "limit 2",
            req: RangeRequest { limit: 2, ..all() },
            want: &["a", "b"],
            want_more: true,
            want_count: 6,
        },
        Case {
            name: "limit equals total",
            req: RangeRequest { limit: 6, ..all() },
            want: &["a", "b", "b/1", "b/2", "c", "d"],
            want_more: false,
            want_count: 6,
        },
        Case {
            name: "limit above total",
            req: RangeRequest { limit: 60, ..all() },
            want: &["a", "b", "b/1", "b/2", "c", "d"],
            want_more: false,
            want_count: 6,
        },
        Case {
            name: "count only",
            req: RangeRequest {
                count_only: true,
                ..all()
            },
            want: &[],
            want_more: false,
            want_count: 6,
        },
        Case {
            name: "count only ignores limit",
            req: RangeRequest {
                count_only: true,
                limit: 1,
                ..all()
            },
            want: &[],
            want_more: false,
            want_count: 6,
        },
        Case {
            name: "count only in a range",
            req: RangeRequest {
                count_only: true,
                ..rr("b", "c")
            },
            want: &[],
            want_more: false,
            want_count: 3,
        },
    ];
    let h = range_fixture();
    for c in cases {
        let resp = h.range(c.req).unwrap();
        assert_eq!(keys(&resp.kvs), c.want, "{}", c.name);
        assert_eq!(
            (resp.more, resp.count),
            (c.want_more, c.want_count),
            "{}",
            c.name
        );
    }
}

/// a: create 2, mod 5, version 2, value "0" · b: create 3, mod 6, version 2, value "9" ·
/// c: create 4, mod 4, version 1, value "2" · d: create 7, mod 7, version 1, value "5".
fn sort_fixture() -> Harness {
    let mut h = Harness::new();
    for (k, v) in [
        ("a", "3"),
        ("b", "1"),
        ("c", "2"),
        ("a", "0"),
        ("b", "9"),
        ("d", "5"),
    ] {
        h.put(k, v);
    }
    h
}

#[test]
fn every_sort_target_in_both_orders() {
    use SortOrder::*;
    use SortTarget::*;
    struct Case {
        target: SortTarget,
        order: SortOrder,
        limit: i64,
        want: &'static [&'static str],
        want_more: bool,
    }
    let c = |target, order, want| Case {
        target,
        order,
        limit: 0,
        want,
        want_more: false,
    };
    let cases = [
        c(Key, None, &["a", "b", "c", "d"]),
        c(Key, Ascend, &["a", "b", "c", "d"]),
        c(Key, Descend, &["d", "c", "b", "a"]),
        c(Version, Ascend, &["c", "d", "a", "b"]),
        c(Version, Descend, &["a", "b", "c", "d"]),
        c(Create, Ascend, &["a", "b", "c", "d"]),
        c(Create, Descend, &["d", "c", "b", "a"]),
        c(Mod, Ascend, &["c", "a", "b", "d"]),
        c(Mod, Descend, &["d", "b", "a", "c"]),
        c(Value, Ascend, &["a", "c", "d", "b"]),
        c(Value, Descend, &["b", "d", "c", "a"]),
        // A non-KEY target with order NONE sorts ascending…
        c(Version, None, &["c", "d", "a", "b"]),
        c(Value, None, &["a", "c", "d", "b"]),
        // …but, as in etcd, only the limit+1 keys it read in key order.
        Case {
            target: Version,
            order: None,
            limit: 1,
            want: &["a"],
            want_more: true,
        },
        Case {
            target: Version,
            order: Ascend,
            limit: 1,
            want: &["c"],
            want_more: true,
        },
        Case {
            target: Mod,
            order: Descend,
            limit: 2,
            want: &["d", "b"],
            want_more: true,
        },
        Case {
            target: Value,
            order: Descend,
            limit: 3,
            want: &["b", "d", "c"],
            want_more: true,
        },
    ];
    let h = sort_fixture();
    for c in cases {
        let name = format!("{:?} {:?} limit {}", c.target, c.order, c.limit);
        let req = RangeRequest {
            sort_target: c.target as i32,
            sort_order: c.order as i32,
            limit: c.limit,
            ..rr("\0", "\0")
        };
        let resp = h.range(req).unwrap();
        assert_eq!(keys(&resp.kvs), c.want, "{name}");
        assert_eq!((resp.more, resp.count), (c.want_more, 4), "{name}");
    }
}

#[test]
fn revision_filters_apply_after_count() {
    struct Case {
        name: &'static str,
        req: RangeRequest,
        want: &'static [&'static str],
        want_more: bool,
    }
    let all = || rr("\0", "\0");
    let cases = [
        Case {
            name: "min mod",
            req: RangeRequest {
                min_mod_revision: 5,
                ..all()
            },
            want: &["a", "b", "d"],
            want_more: false,
        },
        Case {
            name: "max mod",
            req: RangeRequest {
                max_mod_revision: 5,
                ..all()
            },
            want: &["a", "c"],
            want_more: false,
        },
        Case {
            name: "min create",
            req: RangeRequest {
                min_create_revision: 3,
                ..all()
            },
            want: &["b", "c", "d"],
            want_more: false,
        },
        Case {
            name: "max create",
            req: RangeRequest {
                max_create_revision: 3,
                ..all()
            },
            want: &["a", "b"],
            want_more: false,
        },
        Case {
            name: "combined",
            req: RangeRequest {
                min_mod_revision: 5,
                max_create_revision: 3,
                ..all()
            },
            want: &["a", "b"],
            want_more: false,
        },
        Case {
            name: "filter then limit",
            req: RangeRequest {
                min_mod_revision: 5,
                limit: 1,
                ..all()
            },
            want: &["a"],
            want_more: true,
        },
        Case {
            name: "filter then sort",
            req: RangeRequest {
                min_mod_revision: 5,
                sort_target: SortTarget::Mod as i32,
                sort_order: SortOrder::Descend as i32,
                ..all()
            },
            want: &["d", "b", "a"],
            want_more: false,
        },
    ];
    let h = sort_fixture();
    for c in cases {
        let resp = h.range(c.req).unwrap();
        assert_eq!(keys(&resp.kvs), c.want, "{}", c.name);
        assert_eq!(
            (resp.more, resp.count),
            (c.want_more, 4),
            "{}: count is before filters",
            c.name
        );
    }
}

#[test]
fn keys_only_drops_values_and_keeps_the_rest() {
    let h = sort_fixture();
    let resp = h
        .range(RangeRequest {
            keys_only: true,
            ..rr("a", "")
        })
        .unwrap();
    assert_eq!(
        resp.kvs,
        [KeyValue {
            key: b"a".to_vec(),
            create_revision: 2,
            mod_revision: 5,
            version: 2,
            value: vec![],
            lease: 0
        }]
    );
}

/// Keys-only answers built from the index equal the records' (values dropped), leases
/// included, at every revision; only a key rewritten since the read's revision has its record
/// read (for the lease it named then).
#[test]
fn keys_only_from_the_index_equals_the_records_with_leases() {
    let mut h = Harness::new();
    h.grant(3);
    h.grant(4);
    let leased = |k: &str, v: &str, lease| {
        put_with(PutRequest {
            lease,
            ..put_req(k, v)
        })
    };
    h.one(leased("a", "1", 3)).unwrap(); // 2
    h.one(leased("b", "1", 4)).unwrap(); // 3
    h.put("c", "1"); // 4
    h.one(leased("b", "2", 3)).unwrap(); // 5
    h.one(del("a", "")).unwrap(); // 6
    h.one(leased("a", "2", 4)).unwrap(); // 7
    h.put("b", "3"); // 8: b loses its lease
    let newest = h.store.current_revision();
    for rev in 1..=newest {
        let all = RangeRequest {
            revision: rev,
            ..rr("\0", "\0")
        };
        let mut want = h.range(all.clone()).unwrap();
        for kv in &mut want.kvs {
            kv.value.clear();
        }
        h.engine.key_reads.store(0, Ordering::Relaxed);
        let got = h
            .range(RangeRequest {
                keys_only: true,
                ..all
            })
            .unwrap();
        assert_eq!(got, want, "at {rev}");
        // Keys whose latest write is newer than `rev` are read for their lease.
        let rewritten = got.kvs.iter().filter(|kv| {
            kv.mod_revision < {
                let latest = h.get(std::str::from_utf8(&kv.key).unwrap());
                latest.map_or(i64::MAX, |l| l.mod_revision)
            }
        });
        assert_eq!(
            h.engine.key_reads.load(Ordering::Relaxed),
            rewritten.count(),
            "records read at {rev}"
        );
    }
    // Inside a txn, a keys-only read sees the lease the txn's own put just set.
    let resp = h
        .txn(TxnRequest {
            success: vec![
                op(Request::RequestPut(PutRequest {
                    lease: 4,
                    ..put_req("c", "2")
                })),
                op_range(RangeRequest {
                    keys_only: true,
                    ..rr("c", "")
                }),
            ],
            ..Default::default()
        })
        .unwrap();
    let Some(Response::ResponseRange(r)) = &resp.responses[1].response else {
        panic!("{resp:?}");
    };
    assert_eq!((r.kvs[0].lease, r.kvs[0].value.len()), (4, 0));
}

#[test]
fn ranges_read_only_the_records_they_return() {
    struct Case {
        name: &'static str,
        req: RangeRequest,
        want_reads: usize,
    }
    let all = || rr("\0", "\0");
    let cases = [
        Case {
            name: "count only",
            req: RangeRequest {
                count_only: true,
                ..all()
            },
            want_reads: 0,
        },
        Case {
            name: "limit",
            req: RangeRequest { limit: 2, ..all() },
            want_reads: 2,
        },
        Case {
            name: "keys only: from the index",
            req: RangeRequest {
                keys_only: true,
                limit: 3,
                ..all()
            },
            want_reads: 0,
        },
        Case {
            name: "sort by mod",
            req: RangeRequest {
                limit: 2,
                sort_target: SortTarget::Mod as i32,
                sort_order: SortOrder::Descend as i32,
                ..all()
            },
            want_reads: 2,
        },
        Case {
            name: "filter",
            req: RangeRequest {
                limit: 2,
                min_mod_revision: 3,
                ..all()
            },
            want_reads: 2,
        },
        Case {
            name: "sort by value needs every value",
            req: RangeRequest {
                limit: 2,
                sort_target: SortTarget::Value as i32,
                sort_order: SortOrder::Ascend as i32,
                ..all()
            },
            want_reads: 10,
        },
    ];
    let mut h = Harness::new();
    for i in 0..10 {
        h.put(&format!("k{i}"), "v");
    }
    for c in cases {
        h.engine.key_reads.store(0, Ordering::Relaxed);
        h.range(c.req).unwrap();
        assert_eq!(
            h.engine.key_reads.load(Ordering::Relaxed),
            c.want_reads,
            "{}",
            c.name
        );
    }
}

#[test]
fn historical_reads_and_revision_errors() {
    struct Case {
        name: &'static str,
        revision: i64,
        want: Result<Option<&'static str>, EtcdError>,
    }
    let mut h = Harness::new();
    h.put("foo", "v1"); // 2
    h.put("foo", "v2"); // 3
    h.delete("foo", ""); // 4
    h.put("foo", "v3"); // 5
    let at2 = h
        .range(RangeRequest {
            revision: 2,
            ..rr("foo", "")
        })
        .unwrap();
    assert_eq!(at2.kvs[0].value, b"v1");
    assert_eq!(
        at2.header.unwrap().revision,
        5,
        "header carries the current revision"
    );
    assert!(matches!(h.compact(3), Ok(ApplyResponse::Compaction(_))));
    let cases = [
        Case {
            name: "current",
            revision: 0,
            want: Ok(Some("v3")),
        },
        Case {
            name: "negative is current",
            revision: -1,
            want: Ok(Some("v3")),
        },
        Case {
            name: "compacted",
            revision: 2,
            want: Err(EtcdError::Compacted),
        },
        Case {
            name: "at the compacted revision",
            revision: 3,
            want: Ok(Some("v2")),
        },
        Case {
            name: "deleted then",
            revision: 4,
            want: Ok(None),
        },
        Case {
            name: "latest",
            revision: 5,
            want: Ok(Some("v3")),
        },
        Case {
            name: "future",
            revision: 6,
            want: Err(EtcdError::FutureRevision),
        },
    ];
    for c in cases {
        let got = h
            .range(RangeRequest {
                revision: c.revision,
                ..rr("foo", "")
            })
            .map(|r| {
                r.kvs
                    .first()
                    .map(|kv| String::from_utf8(kv.value.clone()).unwrap())
            });
        assert_eq!(got, c.want.map(|v| v.map(str::to_owned)), "{}", c.name);
    }
}

// ------------------------------------------------------------------ txn

#[test]
fn txn_compares_every_target_and_result() {
    use CompareResult::*;
    use CompareTarget::*;
    struct Case {
        name: &'static str,
        compare: Vec<Compare>,
        want: bool,
    }
    let k = |t, r, u| cmp("k", "", t, r, u);
    let v = |s: &str| TargetUnion::Value(s.into());
    let cases = [
        Case {
            name: "value equal",
            compare: vec![k(Value, Equal, v("w"))],
            want: true,
        },
        Case {
            name: "value equal old",
            compare: vec![k(Value, Equal, v("v"))],
            want: false,
        },
        Case {
            name: "value greater",
            compare: vec![k(Value, Greater, v("a"))],
            want: true,
        },
        Case {
            name: "value less",
            compare: vec![k(Value, Less, v("a"))],
            want: false,
        },
        Case {
            name: "value not equal",
            compare: vec![k(Value, NotEqual, v("v"))],
            want: true,
        },
        Case {
            name: "version equal",
            compare: vec![k(Version, Equal, TargetUnion::Version(2))],
            want: true,
        },
        Case {
            name: "version greater",
            compare: vec![k(Version, Greater, TargetUnion::Version(1))],
            want: true,
        },
        Case {
            name: "version less",
            compare: vec![k(Version, Less, TargetUnion::Version(2))],
            want: false,
        },
        Case {
            name: "version not equal",
            compare: vec![k(Version, NotEqual, TargetUnion::Version(2))],
            want: false,
        },
        Case {
            name: "create equal",
            compare: vec![k(Create, Equal, TargetUnion::CreateRevision(2))],
            want: true,
        },
        Case {
            name: "create less",
            compare: vec![k(Create, Less, TargetUnion::CreateRevision(3))],
            want: true,
        },
        Case {
            name: "create greater",
            compare: vec![k(Create, Greater, TargetUnion::CreateRevision(2))],
            want: false,
        },
        Case {
            name: "mod equal",
            compare: vec![k(Mod, Equal, TargetUnion::ModRevision(3))],
            want: true,
        },
        Case {
            name: "mod greater",
            compare: vec![k(Mod, Greater, TargetUnion::ModRevision(3))],
            want: false,
        },
        Case {
            name: "mod not equal",
            compare: vec![k(Mod, NotEqual, TargetUnion::ModRevision(4))],
            want: true,
        },
        Case {
            name: "lease equal",
            compare: vec![k(Lease, Equal, TargetUnion::Lease(0))],
            want: true,
        },
        Case {
            name: "lease greater",
            compare: vec![k(Lease, Greater, TargetUnion::Lease(0))],
            want: false,
        },
        Case {
            name: "missing key version is 0",
            compare: vec![cmp("nope", "", Version, Equal, TargetUnion::Version(0))],
            want: true,
        },
        Case {
            name: "missing key create is 0",
            compare: vec![cmp(
                "nope",
                "",
                Create,
                Equal,
                TargetUnion::CreateRevision(0),
            )],
            want: true,
        },
        Case {
            name: "missing key mod is 0",
            compare: vec![cmp("nope", "", Mod, Less, TargetUnion::ModRevision(1))],
            want: true,
        },
        Case {
            name: "missing key lease is 0",
            compare: vec![cmp("nope", "", Lease, Equal, TargetUnion::Lease(0))],
            want: true,
        },
        Case {
            name: "missing key value always fails",
            compare: vec![cmp("nope", "", Value, Equal, v(""))],
            want: false,
        },
        Case {
            name: "missing key value not equal fails too",
            compare: vec![cmp("nope", "", Value, NotEqual, v("x"))],
            want: false,
        },
        Case {
            name: "range: all keys pass",
            compare: vec![cmp("k", "l", Version, Greater, TargetUnion::Version(0))],
            want: true,
        },
        Case {
            name: "range: one key fails",
            compare: vec![cmp("k", "l", Version, Equal, TargetUnion::Version(2))],
            want: false,
        },
        Case {
            name: "range: values",
            compare: vec![cmp("k", "l", Value, NotEqual, v("z"))],
            want: true,
        },
        Case {
            name: "range from key",
            compare: vec![cmp(
                "k2",
                "\0",
                Create,
                Equal,
                TargetUnion::CreateRevision(4),
            )],
            want: true,
        },
        Case {
            name: "empty range compares zero",
            compare: vec![cmp("x", "y", Version, Equal, TargetUnion::Version(0))],
            want: true,
        },
        Case {
            name: "every compare must pass",
            compare: vec![
                k(Version, Equal, TargetUnion::Version(2)),
                k(Mod, Equal, TargetUnion::ModRevision(99)),
            ],
            want: false,
        },
    ];
    let mut h = Harness::new();
    h.put("k", "v"); // 2
    h.put("k", "w"); // 3: k create 2, mod 3, version 2
    h.put("k2", "x"); // 4
    for c in cases {
        let resp = h
            .txn(TxnRequest {
                compare: c.compare,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(resp.succeeded, c.want, "{}", c.name);
        assert_eq!(
            resp.header,
            full_header(4),
            "{}: read-only txn keeps the revision",
            c.name
        );
    }
    assert_eq!(h.store.current_revision(), 4);
}

#[test]
fn txn_writes_share_one_revision_and_read_their_own_writes() {
    let mut h = Harness::new();
    h.put("other", "o"); // 2
    let resp = h
        .txn(TxnRequest {
            compare: vec![],
            success: vec![
                op_put("x", "1"),
                op_put("x", "2"),
                op_range(rr("x", "")),
                op_del("x", ""),
                op_range(rr("x", "")),
                op_put("x", "3"),
            ],
            failure: vec![],
        })
        .unwrap();
    assert!(resp.succeeded);
    assert_eq!(resp.header, full_header(3));
    assert_eq!(h.store.current_revision(), 3);
    let r = |i: usize| match &resp.responses[i].response {
        Some(Response::ResponseRange(r)) => r.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(r(2).kvs[0].value, b"2");
    assert_eq!((r(2).kvs[0].version, r(2).kvs[0].create_revision), (2, 3));
    assert_eq!(
        r(2).header,
        rev_header(3),
        "nested responses carry only the revision"
    );
    assert!(r(4).kvs.is_empty());
    let x = h.get("x").unwrap();
    assert_eq!(
        (
            x.create_revision,
            x.mod_revision,
            x.version,
            x.value.as_slice()
        ),
        (3, 3, 1, &b"3"[..])
    );
    assert_eq!(
        &h.records()[1..],
        [(3, 0, false), (3, 1, false), (3, 2, true), (3, 3, false)]
    );
}

#[test]
fn nested_txns_evaluate_compares_at_txn_start() {
    use CompareResult::*;
    use CompareTarget::*;
    let mut h = Harness::new();
    h.put("k", "v"); // 2
    let inner = TxnRequest {
        // "a" does not exist when the outer txn starts, though the outer txn puts it first.
        compare: vec![cmp("a", "", Version, Equal, TargetUnion::Version(0))],
        success: vec![op_put("b", "2"), op_range(rr("a", ""))],
        failure: vec![op_put("never", "x")],
    };
    let resp = h
        .txn(TxnRequest {
            compare: vec![cmp(
                "k",
                "",
                Value,
                Equal,
                TargetUnion::Value(b"v".to_vec()),
            )],
            success: vec![
                op_put("a", "1"),
                op(Request::RequestTxn(inner)),
                op_range(rr("b", "")),
            ],
            failure: vec![],
        })
        .unwrap();
    assert!(resp.succeeded);
    assert_eq!(resp.header, full_header(3));
    let Some(Response::ResponsePut(p)) = &resp.responses[0].response else {
        panic!()
    };
    assert_eq!(
        *p,
        PutResponse {
            header: rev_header(3),
            prev_kv: None
        }
    );
    let Some(Response::ResponseTxn(nested)) = &resp.responses[1].response else {
        panic!()
    };
    assert!(nested.succeeded);
    assert_eq!(
        nested.header,
        Some(ResponseHeader::default()),
        "etcd leaves nested txn headers empty"
    );
    let Some(Response::ResponseRange(a)) = &nested.responses[1].response else {
        panic!()
    };
    assert_eq!(
        a.kvs[0].value, b"1",
        "nested range sees the outer txn's earlier put"
    );
    let Some(Response::ResponseRange(b)) = &resp.responses[2].response else {
        panic!()
    };
    assert_eq!(
        (b.kvs[0].mod_revision, b.kvs[0].value.as_slice()),
        (3, &b"2"[..])
    );
    assert_eq!(h.get("never"), None);
    assert_eq!(&h.records()[1..], [(3, 0, false), (3, 1, false)]);
}

#[test]
fn txn_failure_branch_and_empty_ops() {
    let mut h = Harness::new();
    let resp = h
        .txn(TxnRequest {
            compare: vec![cmp(
                "k",
                "",
                CompareTarget::Version,
                CompareResult::Greater,
                TargetUnion::Version(0),
            )],
            // The success branch is invalid (unknown lease) but isn't taken, so isn't checked.
            success: vec![op(Request::RequestPut(PutRequest {
                lease: 77,
                ..put_req("s", "1")
            }))],
            failure: vec![op_put("f", "1"), RequestOp { request: None }],
        })
        .unwrap();
    assert!(!resp.succeeded);
    assert_eq!(resp.responses.len(), 2);
    assert_eq!(resp.responses[1], ResponseOp { response: None });
    assert_eq!(resp.header, full_header(2));
    assert!(h.get("f").is_some() && h.get("s").is_none());
}

#[test]
fn failed_txn_validation_changes_nothing() {
    struct Case {
        name: &'static str,
        ops: Vec<RequestOp>,
        want: EtcdError,
    }
    let ignore_value = |k: &str| {
        op(Request::RequestPut(PutRequest {
            key: k.into(),
            ignore_value: true,
            ..Default::default()
        }))
    };
    let ignore_lease = |k: &str| {
        op(Request::RequestPut(PutRequest {
            key: k.into(),
            ignore_lease: true,
            ..Default::default()
        }))
    };
    let leased = |k: &str| {
        op(Request::RequestPut(PutRequest {
            lease: 5,
            ..put_req(k, "v")
        }))
    };
    let at = |revision| {
        op_range(RangeRequest {
            revision,
            ..rr("k", "")
        })
    };
    let nested = |ops| {
        op(Request::RequestTxn(TxnRequest {
            success: ops,
            ..Default::default()
        }))
    };
    // Store at revision 5, compacted at 3; "k" exists.
    let cases = [
        Case {
            name: "ignore_value on a missing key",
            ops: vec![op_put("a", "1"), ignore_value("missing")],
            want: EtcdError::KeyNotFound,
        },
        Case {
            name: "ignore_lease on a missing key",
            ops: vec![op_put("a", "1"), ignore_lease("missing")],
            want: EtcdError::KeyNotFound,
        },
        Case {
            name: "unknown lease",
            ops: vec![op_put("a", "1"), leased("b")],
            want: EtcdError::LeaseNotFound,
        },
        Case {
            name: "future range",
            ops: vec![op_put("a", "1"), at(6)],
            want: EtcdError::FutureRevision,
        },
        Case {
            name: "compacted range",
            ops: vec![op_put("a", "1"), at(2)],
            want: EtcdError::Compacted,
        },
        Case {
            name: "puts are checked before ranges",
            ops: vec![at(99), leased("b")],
            want: EtcdError::LeaseNotFound,
        },
        Case {
            name: "ignore_value is checked at txn start",
            ops: vec![op_put("q", "1"), ignore_value("q")],
            want: EtcdError::KeyNotFound,
        },
        Case {
            name: "ignore_value after a delete in the same txn",
            ops: vec![op_put("a", "1"), op_del("k", ""), ignore_value("k")],
            want: EtcdError::KeyNotFound,
        },
        Case {
            name: "nested txn",
            ops: vec![op_put("a", "1"), nested(vec![ignore_lease("missing")])],
            want: EtcdError::KeyNotFound,
        },
    ];
    for c in cases {
        let mut h = Harness::new();
        h.put("k", "v"); // 2
        h.put("k", "w"); // 3
        h.put("j", "x"); // 4
        h.put("k", "y"); // 5
        h.compact(3).unwrap();
        let before = h.snapshot();
        let records = h.records();
        let got = h.txn(TxnRequest {
            success: c.ops,
            ..Default::default()
        });
        assert_eq!(got, Err(c.want), "{}", c.name);
        let after = h.snapshot();
        assert_eq!(
            (after.0, after.1, &after.4),
            (before.0, before.1, &before.4),
            "{}: memory",
            c.name
        );
        assert_eq!(h.records(), records, "{}: disk", c.name);
        // The next write takes the revision the failed txn didn't.
        assert_eq!(h.put("z", "1"), 6, "{}", c.name);
    }
}

// ------------------------------------------------------------------ batches

#[test]
fn one_failing_request_does_not_stop_the_batch() {
    let mut h = Harness::new();
    let bad_txn = TxnRequest {
        success: vec![
            op_put("t", "1"),
            op(Request::RequestPut(PutRequest {
                key: b"nope".to_vec(),
                ignore_value: true,
                ..Default::default()
            })),
        ],
        ..Default::default()
    };
    let results = h.apply(vec![
        put("a", "1"),
        put_with(PutRequest {
            lease: 7,
            ..put_req("b", "1")
        }),
        put("c", "1"),
        del("missing", ""),
        txn(bad_txn),
        compact(100),
        put("a", "2"),
    ]);
    let revs: Vec<Result<i64, EtcdError>> = results
        .into_iter()
        .map(|r| {
            r.map(|resp| match resp {
                ApplyResponse::Put(r) => r.header.unwrap().revision,
                ApplyResponse::DeleteRange(r) => r.header.unwrap().revision,
                other => panic!("{other:?}"),
            })
        })
        .collect();
    assert_eq!(
        revs,
        [
            Ok(2),
            Err(EtcdError::LeaseNotFound),
            Ok(3),
            Ok(3),
            Err(EtcdError::KeyNotFound),
            Err(EtcdError::FutureRevision),
            Ok(4)
        ]
    );
    assert_eq!(h.store.current_revision(), 4);
    assert_eq!(h.records(), [(2, 0, false), (3, 0, false), (4, 0, false)]);
    assert_eq!(h.meta(META_CONSISTENT_INDEX), Some(1));
    assert_eq!(h.meta(META_TERM), Some(TERM));
    let reopened = h.reopen();
    assert_eq!(
        (
            reopened.current_revision(),
            reopened.consistent_index(),
            reopened.term()
        ),
        (4, 1, TERM)
    );
}

#[test]
fn engine_failure_fails_the_batch_and_leaves_memory_unchanged() {
    let mut h = Harness::new();
    h.put("a", "1"); // 2
    h.put("b", "1"); // 3
    let before = h.snapshot();
    let records = h.records();
    h.engine.fail_commit.store(true, Ordering::Relaxed);
    let got = h.store.apply_batch(
        10,
        TERM + 1,
        vec![
            put("a", "2"),
            del("b", ""),
            put("c", "1"),
            txn(TxnRequest {
                success: vec![op_put("d", "1"), op_del("a", "")],
                ..Default::default()
            }),
            compact(3),
        ],
    );
    assert!(
        matches!(got, Err(EtcdError::Internal(ref m)) if m.contains("injected")),
        "{got:?}"
    );
    assert_eq!(h.snapshot(), before);
    assert_eq!(h.records(), records);
    assert_eq!(h.get("b").unwrap().value, b"1");
    h.engine.fail_commit.store(false, Ordering::Relaxed);
    assert_eq!(h.put("c", "1"), 4, "the failed batch took no revision");
}

#[test]
fn headers_carry_identity_and_the_batch_term() {
    let mut h = Harness::new();
    assert_eq!(
        h.range(rr("a", "")).unwrap().header,
        Some(ResponseHeader {
            raft_term: 0,
            ..full_header(1).unwrap()
        })
    );
    h.put("a", "1");
    let results = h
        .store
        .apply_batch(2, 9, vec![put("b", "1"), compact(2)])
        .unwrap();
    let want = Some(ResponseHeader {
        raft_term: 9,
        ..full_header(3).unwrap()
    });
    assert!(matches!(&results[0], Ok(ApplyResponse::Put(r)) if r.header == want));
    assert!(matches!(&results[1], Ok(ApplyResponse::Compaction(r)) if r.header == want));
    assert_eq!(h.range(rr("a", "")).unwrap().header.unwrap().raft_term, 9);
    let status = h.store.status().unwrap();
    assert_eq!(
        (
            status.revision,
            status.compact_revision,
            status.consistent_index,
            status.term
        ),
        (3, 2, 2, 9)
    );
    assert!(status.db_size > 0 && status.db_size_in_use > 0);
}

#[test]
fn requests_for_other_appliers_answer_empty() {
    let mut h = Harness::new();
    let range = InternalRaftRequest {
        range: Some(rr("a", "")),
        ..Default::default()
    };
    let results = h.apply(vec![range, InternalRaftRequest::default()]);
    assert_eq!(
        results,
        [Ok(ApplyResponse::Empty), Ok(ApplyResponse::Empty)]
    );
    assert_eq!(h.store.current_revision(), 1);
    assert_eq!(h.meta(META_CONSISTENT_INDEX), Some(1));
}

// ------------------------------------------------------------------ compaction

#[test]
fn compaction_removes_superseded_records() {
    let mut h = Harness::new();
    h.put("a", "1"); // 2
    h.put("a", "2"); // 3
    h.put("b", "1"); // 4
    h.delete("b", ""); // 5
    h.put("c", "1"); // 6
    h.put("c", "2"); // 7
    struct Step {
        at: i64,
        want: Result<(), EtcdError>,
        want_records: &'static [(i64, i64, bool)],
        want_keys: &'static [&'static str],
    }
    let steps = [
        // b's DELETE at the compaction revision stays until a later compaction (etcd #18474).
        Step {
            at: 5,
            want: Ok(()),
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false), (7, 0, false)],
            want_keys: &["a", "b", "c"],
        },
        Step {
            at: 5,
            want: Err(EtcdError::Compacted),
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false), (7, 0, false)],
            want_keys: &["a", "b", "c"],
        },
        Step {
            at: 4,
            want: Err(EtcdError::Compacted),
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false), (7, 0, false)],
            want_keys: &["a", "b", "c"],
        },
        Step {
            at: 8,
            want: Err(EtcdError::FutureRevision),
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false), (7, 0, false)],
            want_keys: &["a", "b", "c"],
        },
        Step {
            at: 7,
            want: Ok(()),
            want_records: &[(3, 0, false), (7, 0, false)],
            want_keys: &["a", "c"],
        },
    ];
    for s in steps {
        let got = h.compact(s.at);
        match (&got, &s.want) {
            (Ok(ApplyResponse::Compaction(r)), Ok(())) => assert_eq!(r.header, full_header(7)),
            (Err(e), Err(want)) => assert_eq!(e, want, "compact {}", s.at),
            _ => panic!("compact {}: {got:?}", s.at),
        }
        assert_eq!(h.records(), s.want_records, "compact {}", s.at);
        let index_keys: Vec<String> = h
            .store
            .index()
            .iter()
            .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
            .collect();
        assert_eq!(
            index_keys, s.want_keys,
            "compact {}: b is gone from the index once its tombstone is compacted",
            s.at
        );
    }
    assert_eq!(
        h.store.current_revision(),
        7,
        "compaction takes no revision"
    );
    assert_eq!(
        (
            h.meta(META_SCHEDULED_COMPACT),
            h.meta(META_FINISHED_COMPACT)
        ),
        (Some(7), Some(7))
    );
    assert_eq!(h.get("a").unwrap().value, b"2");
    assert_eq!(h.get("c").unwrap().version, 2);
    assert_eq!(
        h.range(RangeRequest {
            revision: 6,
            ..rr("c", "")
        }),
        Err(EtcdError::Compacted)
    );
}

#[test]
fn a_delete_at_the_compaction_revision_outlives_it_and_a_restart() {
    // etcd #18474 and #19249 (3.5.16, 3.5.18): the DELETE at the compaction revision stays,
    // for a watch from that revision, and a restart indexes it again.
    let mut h = Harness::new();
    h.put("a", "1"); // 2
    h.delete("a", ""); // 3
    h.put("b", "1"); // 4
    let keys_before = h.store.status().unwrap().keys;
    h.compact(3).unwrap();
    assert_eq!(h.records(), [(3, 0, true), (4, 0, false)]);
    // Compaction changes no key count: live keys, as etcd's keysGauge.
    assert_eq!((keys_before, h.store.status().unwrap().keys), (1, 1));
    let lone = |created, version| {
        vec![(
            b"a".to_vec(),
            vec![
                (created, version, vec![Revision::new(3, 0)]),
                (0, 0, vec![]),
            ],
        )]
    };
    assert_eq!(fingerprint(&h.store)[..1], lone(2, 2)[..]);
    // Rebuilt with the same revisions; the generation's creation is unknown then (etcd's
    // restoreTombstone), and never read: the key does not exist at any revision.
    let reopened = h.reopen();
    assert_eq!(fingerprint(&reopened)[..1], lone(0, 1)[..]);
    assert_eq!(reopened.status().unwrap().keys, 1);
    assert_eq!(reopened.range(&rr("a", "")).unwrap().kvs, vec![]);
    // The next compaction drops it.
    h.put("c", "1"); // 5
    h.compact(5).unwrap();
    assert_eq!(h.records(), [(4, 0, false), (5, 0, false)]);
    assert!(h.store.index().key_index(b"a").is_none());
    assert_eq!(h.store.status().unwrap().keys, 2);
}

#[test]
fn compaction_deletes_in_bounded_batches() {
    let mut h = Harness::new();
    h.store.set_compaction_batch_limit(2);
    for i in 0..7 {
        h.put("k", &i.to_string()); // 2..=8
    }
    h.put("other", "x"); // 9
    h.compact(8).unwrap();
    assert_eq!(h.records(), [(8, 0, false), (9, 0, false)]);
    assert_eq!(h.meta(META_FINISHED_COMPACT), Some(8));
    assert_eq!(h.get("k").unwrap().version, 7);
}

#[test]
fn reopen_rebuilds_the_same_state() {
    let mut h = Harness::new();
    h.grant(42);
    h.put("a", "1");
    h.put("b", "1");
    h.txn(TxnRequest {
        success: vec![
            op_put("c", "1"),
            op_put("c", "2"),
            op_del("a", ""),
            op_put("a", "3"),
        ],
        ..Default::default()
    })
    .unwrap();
    h.put("b", "2");
    h.delete("b", "");
    h.one(put_with(PutRequest {
        lease: 42,
        ..put_req("d", "1")
    }))
    .unwrap();
    h.compact(4).unwrap();
    h.put("c", "3");
    let reopened = h.reopen();
    assert_eq!(
        (
            reopened.current_revision(),
            reopened.compact_revision(),
            reopened.consistent_index(),
            reopened.term()
        ),
        (
            h.store.current_revision(),
            h.store.compact_revision(),
            h.store.consistent_index(),
            h.store.term()
        )
    );
    assert_eq!(fingerprint(&reopened), fingerprint(&h.store));
    // The rebuild reads records in place: the same key indexes, leases included.
    assert!(
        reopened.index().iter().eq(h.store.index().iter()),
        "rebuilt index differs"
    );
    assert_eq!(reopened.leased_keys(), vec![(b"d".to_vec(), 42)]);
    for rev in [0, 4, 5, 6, 7] {
        let req = RangeRequest {
            revision: rev,
            ..rr("\0", "\0")
        };
        assert_eq!(reopened.range(&req), h.store.range(&req), "at {rev}");
    }
    assert_eq!(reopened.range(&rr("d", "")).unwrap().kvs[0].lease, 42);
}

#[test]
fn reopen_of_an_empty_engine() {
    let h = Harness::new();
    let s = h.reopen();
    assert_eq!(
        (
            s.current_revision(),
            s.compact_revision(),
            s.consistent_index(),
            s.term()
        ),
        (1, -1, 0, 0)
    );
    assert!(s.index().is_empty());
}

#[test]
fn reopen_finishes_an_interrupted_compaction() {
    struct Case {
        name: &'static str,
        /// Records deleted by hand, as if some deletion batches had committed.
        pre_deleted: &'static [(i64, bool)],
        want_records: &'static [(i64, i64, bool)],
        want_current: i64,
    }
    let cases = [
        // b's DELETE at the compaction revision stays (etcd #18474); with b's put already
        // gone it is indexed alone (#19249).
        Case {
            name: "nothing deleted yet",
            pre_deleted: &[],
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false)],
            want_current: 6,
        },
        Case {
            name: "half deleted",
            pre_deleted: &[(2, false), (4, false)],
            want_records: &[(3, 0, false), (5, 0, true), (6, 0, false)],
            want_current: 6,
        },
    ];
    for c in cases {
        let mut h = Harness::new();
        h.put("a", "1"); // 2
        h.put("a", "2"); // 3
        h.put("b", "1"); // 4
        h.delete("b", ""); // 5
        h.put("c", "1"); // 6
        let mut w = h.engine.mem.write().unwrap();
        w.put(Table::Meta, META_SCHEDULED_COMPACT, &5i64.to_be_bytes())
            .unwrap();
        for &(main, tomb) in c.pre_deleted {
            w.delete(Table::Key, &Revision::new(main, 0).to_bytes(tomb))
                .unwrap();
        }
        w.commit().unwrap();
        let s = h.reopen();
        assert_eq!(s.compact_revision(), 5, "{}", c.name);
        assert_eq!(s.current_revision(), c.want_current, "{}", c.name);
        assert_eq!(h.records(), c.want_records, "{}", c.name);
        assert_eq!(h.meta(META_FINISHED_COMPACT), Some(5), "{}", c.name);
        let b = s.index().key_index(b"b").map(|ki| ki.generations().len());
        assert_eq!(b, Some(2), "{}: b's lone tombstone, then nothing", c.name);
        assert!(s.index().get(b"b", 6).is_none(), "{}", c.name);
        assert_eq!(
            s.range(&RangeRequest {
                revision: 4,
                ..rr("a", "")
            }),
            Err(EtcdError::Compacted)
        );
    }
}

#[test]
fn revision_never_goes_back_when_compaction_deleted_every_record() {
    let mut h = Harness::new();
    h.put("a", "1"); // 2
    h.delete("a", ""); // 3
    let mut w = h.engine.mem.write().unwrap();
    w.put(Table::Meta, META_SCHEDULED_COMPACT, &3i64.to_be_bytes())
        .unwrap();
    w.delete(Table::Key, &Revision::new(2, 0).to_bytes(false))
        .unwrap();
    w.delete(Table::Key, &Revision::new(3, 0).to_bytes(true))
        .unwrap();
    w.commit().unwrap();
    let s = h.reopen();
    assert_eq!((s.current_revision(), s.compact_revision()), (3, 3));
    assert!(s.index().is_empty());
}

#[test]
fn uncommitted_batches_vanish_with_a_crash_and_leave_the_consistent_index_behind() {
    let engine = Arc::new(MemEngine::new());
    let mut s = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let put = |k: &str| InternalRaftRequest {
        put: Some(PutRequest {
            key: k.into(),
            value: b"v".to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.apply_deferred(1, 1, vec![put("a")], Vec::new(), &[])
        .unwrap();
    s.commit().unwrap();
    s.apply_deferred(2, 1, vec![put("b")], Vec::new(), &[])
        .unwrap();
    s.apply_deferred(3, 1, vec![put("c")], Vec::new(), &[])
        .unwrap();
    assert_eq!(s.pending_ops(), 2);
    assert!(s.pending_bytes() > 2, "request bytes are counted too");
    let all = RangeRequest {
        key: vec![0],
        range_end: vec![0],
        ..Default::default()
    };
    assert_eq!(s.range(&all).unwrap().count, 3);
    let committed_index = engine
        .read()
        .unwrap()
        .get(Table::Meta, META_CONSISTENT_INDEX)
        .unwrap();
    assert_eq!(
        committed_index,
        Some(1u64.to_be_bytes().to_vec()),
        "entries 2, 3 uncommitted"
    );
    // A crash: the buffered batches are never committed.
    drop(s);
    let s = Store::open(engine, MemberIdentity::default()).unwrap();
    assert_eq!(s.consistent_index(), 1, "the WAL replays entries 2 and 3");
    assert_eq!(s.current_revision(), 2);
    assert_eq!(s.range(&all).unwrap().count, 1);
}

#[test]
fn another_owners_ops_commit_with_the_batch_and_its_consistent_index() {
    let engine = Arc::new(MemEngine::new());
    let mut s = Store::open(engine.clone(), MemberIdentity::default()).unwrap();
    let ops = vec![actcd_types::storage::Op::Put {
        table: Table::AuthRoles,
        key: b"app".to_vec(),
        value: b"role".as_slice().into(),
    }];
    // An auth entry at index 4 with nothing after it in its Ready: no requests, only its writes.
    s.apply_deferred(4, 1, Vec::new(), ops, &[]).unwrap();
    let committed = |table, key: &[u8]| engine.read().unwrap().get(table, key).unwrap();
    assert_eq!(
        committed(Table::AuthRoles, b"app"),
        None,
        "not before the commit"
    );
    s.commit().unwrap();
    assert_eq!(committed(Table::AuthRoles, b"app"), Some(b"role".to_vec()));
    assert_eq!(
        committed(Table::Meta, META_CONSISTENT_INDEX),
        Some(4u64.to_be_bytes().to_vec())
    );
    assert_eq!(s.current_revision(), 1, "the key space did not move");
}

// ------------------------------------------------------------------ leases, events, history

fn event_summary(events: &[actcd_proto::mvccpb::Event]) -> Vec<(i32, String, i64)> {
    events
        .iter()
        .map(|e| {
            let kv = e.kv.as_ref().unwrap();
            (
                e.r#type,
                String::from_utf8_lossy(&kv.key).into_owned(),
                kv.mod_revision,
            )
        })
        .collect()
}

fn attached(key: &str, old_lease: i64, new_lease: i64) -> LeaseAttachment {
    LeaseAttachment {
        key: key.as_bytes().to_vec(),
        old_lease,
        new_lease,
    }
}

#[test]
fn delete_keys_deletes_at_one_revision_and_reports_the_detachments() {
    let mut h = Harness::new();
    h.store.set_notify(true);
    h.grant(7);
    for k in ["a", "b", "c"] {
        h.one(put_with(PutRequest {
            lease: 7,
            ..put_req(k, "v")
        }))
        .unwrap(); // 2, 3, 4
    }
    // Moving c to no lease is reported; a lease-less write is not.
    h.put("c", "free"); // 5
    h.put("d", "free"); // 6
    assert_eq!(
        h.attached,
        vec![
            attached("a", 0, 7),
            attached("b", 0, 7),
            attached("c", 0, 7),
            attached("c", 7, 0)
        ]
    );
    h.attached.clear();
    h.take_outbox_events();
    match h.delete_keys(&["a", "b", "gone"]) {
        Ok(ApplyResponse::DeleteRange(r)) => {
            assert_eq!((r.header, r.deleted), (full_header(7), 2))
        }
        other => panic!("delete keys: {other:?}"),
    }
    let out = h.store.take_outbox();
    assert_eq!(
        event_summary(&out.events),
        vec![(1, "a".into(), 7), (1, "b".into(), 7)],
        "deletes at one revision"
    );
    assert_eq!(h.attached, vec![attached("a", 7, 0), attached("b", 7, 0)]);
    assert!(h.get("a").is_none() && h.get("b").is_none());
    assert_eq!(h.get("c").unwrap().value, b"free");
    assert_eq!(h.store.leased_keys(), Vec::new());
    // Nothing left to delete: the revision stays.
    match h.delete_keys(&["a"]) {
        Ok(ApplyResponse::DeleteRange(r)) => {
            assert_eq!((r.header, r.deleted), (full_header(7), 0))
        }
        other => panic!("delete keys: {other:?}"),
    }
}

#[test]
fn leased_keys_survive_reopen() {
    let mut h = Harness::new();
    h.grant(3);
    h.grant(4);
    h.one(put_with(PutRequest {
        lease: 3,
        ..put_req("x", "1")
    }))
    .unwrap();
    h.one(put_with(PutRequest {
        lease: 4,
        ..put_req("y", "1")
    }))
    .unwrap();
    h.one(put_with(PutRequest {
        lease: 4,
        ..put_req("z", "1")
    }))
    .unwrap();
    // y moves to lease 3, then is deleted; z moves to no lease.
    h.one(put_with(PutRequest {
        lease: 3,
        ..put_req("y", "2")
    }))
    .unwrap();
    h.one(del("y", "")).unwrap();
    h.put("z", "2");
    let want = vec![(b"x".to_vec(), 3)];
    assert_eq!(h.store.leased_keys(), want);
    let reopened = Store::open(Arc::new(h.engine.clone()), ID).unwrap();
    assert_eq!(reopened.leased_keys(), want);
}

#[test]
fn a_failed_batch_takes_its_lease_changes_back() {
    let mut h = Harness::new();
    h.grant(3);
    h.engine.fail_commit.store(true, Ordering::Relaxed);
    let got = h.store.apply_batch_with(
        1,
        TERM,
        vec![put_with(PutRequest {
            lease: 3,
            ..put_req("x", "1")
        })],
        &h.leases,
    );
    assert!(got.is_err());
    assert_eq!(h.store.leased_keys(), Vec::new());
}

#[test]
fn history_reads_events_by_revision_without_splitting_one() {
    let mut h = Harness::new();
    h.put("a", "1"); // 2
    h.txn(TxnRequest {
        success: vec![op_put("b", "1"), op_put("c", "1")],
        ..Default::default()
    })
    .unwrap(); // 3
    h.one(del("a", "")).unwrap(); // 4
    let all = h.store.history(2, 100, 100).unwrap();
    assert_eq!(
        event_summary(&all.events),
        vec![
            (0, "a".into(), 2),
            (0, "b".into(), 3),
            (0, "c".into(), 3),
            (1, "a".into(), 4)
        ]
    );
    assert_eq!((all.through, all.current_revision), (4, 4));
    // Two events fit after revision 2's one only if revision 3 stays whole.
    let part = h.store.history(2, 100, 2).unwrap();
    assert_eq!(part.events.len(), 3);
    assert_eq!(part.through, 3);
    let one = h.store.history(2, 100, 1).unwrap();
    assert_eq!((one.events.len(), one.through), (1, 2));
}

#[test]
fn events_match_what_the_batch_changed_and_refused_requests_add_none() {
    let mut h = Harness::new();
    h.store.set_notify(true);
    h.apply(vec![
        put("a", "1"), // 2
        put_with(PutRequest {
            lease: 99,
            ..put_req("b", "1")
        }), // refused
        del("a", ""),  // 3
    ]);
    let out = h.store.take_outbox();
    assert_eq!(
        event_summary(&out.events),
        vec![(0, "a".into(), 2), (1, "a".into(), 3)]
    );
}

/// The whole-store scans let go of the pages they mapped once done; reads of a few keys don't.
#[test]
fn hashes_release_the_pages_they_scanned() {
    let mut h = Harness::new();
    h.one(put("a", "1")).unwrap();
    h.store.commit().unwrap();
    let releases = || h.engine.releases.load(Ordering::Relaxed);
    let before = releases();
    h.range(rr("a", "")).unwrap();
    assert_eq!(releases(), before);
    h.store.hash_kv(0).unwrap();
    assert_eq!(releases(), before + 1);
    h.store.hash_backend().unwrap();
    assert_eq!(releases(), before + 2);
}
