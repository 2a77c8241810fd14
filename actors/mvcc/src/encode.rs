//! A unary Range answered in its wire form, written once, straight from the stored records.
//!
//! A `key` record's body (after its checksum, [`key_record`]) is already the protobuf encoding
//! of the `mvccpb.KeyValue` a Range returns, so a `RangeResponse` is its header, then each
//! record body as field 2 (tag, length, body), then `more` and `count`. Read through the
//! message path (`View::range`), a Range of N records holds each record three times at its
//! peak: decoded `KeyValue`s (their own key and value allocations), the response buffer being
//! encoded from them, and the old buffer while that one grows; and it reads the whole range
//! under the index's read lock, holding back every apply. Here:
//!
//! 1. **When the Range is read** ([`unary`]), on the caller's thread: the visible entries'
//!    revisions are collected from the index in slices of [`SLICE`] keys, each under a read
//!    lock of its own (16 bytes a record, no key copied but one per slice), at the revision
//!    pinned by the view; then every record is looked at through one owned read transaction
//!    of the engine (with the view's not-yet-committed records over it), borrowed, its
//!    checksum verified and its length summed. Nothing is copied.
//! 2. **When the answer is written** ([`EncodedAnswer::write`], tonic's encoder, once the
//!    response body is polled): the buffer is reserved at the exact length once, and each
//!    record body is copied into it from the map. That buffer is the answer's only copy. An
//!    LMDB read transaction guarantees the slices it lends for its life, so phase 1 keeps
//!    where each record is and phase 2 is one copy per record, with no lookup (a million
//!    lookups would hold the thread writing the answer for most of a second).
//!
//! The transaction is what makes the two phases one answer: it keeps the snapshot the records
//! were checked in until they are copied, whatever compaction does meanwhile (it pins the
//! engine's pages for that long: the time to copy the answer, plus the time the client's
//! flow-control window takes to open before the body is first polled). An answer whose
//! key-values come to less than [`COPY_BELOW`] bytes (nearly every Range) is copied out in
//! phase 1 instead, in the same pass that checks its records, and keeps no transaction: one
//! lookup per record instead of two, and nothing pinned while the client is slow.
//!
//! Revision rules are `View::range`'s: a future revision is `FutureRevision`; a revision below
//! the view's or the index's compaction is `Compacted`, checked again on every slice (the
//! writer may compact the index between two); a record the index names that the transaction
//! does not hold was removed by a compaction accepted after the view, so the read's revision
//! is compacted (`ReadViews` reads a Range of the latest revision again on a newer view).
//!
//! **Keys-only** ([`keys_only`]): a keys-only `KeyValue` (key 1, create_revision 2,
//! mod_revision 3, version 4, lease 6) is all in the index entry, except the lease of a key
//! written again after the read's revision (the index keeps only the latest write's lease):
//! that one is read from its record in the transaction, as `View::kvs` does. Phase 1 walks the
//! index and sums the answer's length; phase 2 walks it again at the same revision and writes
//! each entry straight into tonic's buffer. So the answer exists once (the buffer), with no
//! `KeyValue` and nothing per key kept between the phases; a small one is encoded in phase 1
//! as above. Entries visible at a revision do not change until the index is compacted past
//! it: a compaction past the read's revision accepted between the two phases makes phase 2
//! fail with `Compacted` (etcd, reading under one transaction, would still answer). The
//! entries of a slice, and the leases read from records, are taken under that slice's lock;
//! a record read counts as [`LOOKUP`] entries, so a slice of rewritten keys is shorter.
//! Measured (1M keys, release, `benches/million.sh`, two runs): a keys-only Range of the
//! 47 MB answer peaks at 46 MiB above idle and 0.32 s of server CPU, where building
//! `KeyValue`s for prost took 298 MiB (etcd 3.5.1: 70–415 MiB, 2.6 s).
//!
//! **Count-only** is the header and the count, whatever the order, filters or limit, as
//! `View::range` answers.
//!
//! Only top-level Ranges in the default order (sort NONE, or KEY ascending) without revision
//! filters, and count-only ones, are encoded here; the others (sorted or filtered), and ranges
//! inside txns, go through `View::range`. The encoded answer is byte for byte what
//! `View::range` answers, encoded by prost (`encode_tests.rs` checks it over random histories
//! and requests).

use std::sync::Arc;

use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::{RangeRequest, ResponseHeader};
use actcd_types::key_record::{self, DamagedRecord, KeyFields};
use actcd_types::msg::EncodedRange;
use actcd_types::revision::REV_BYTES_LEN;
use actcd_types::storage::{Fresh, FreshTxn, ReadEngine, ReadTxn, Table, read_with};
use actcd_types::{EtcdError, Revision};
use prost::Message;
use prost::bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::error::Error;
use crate::key_index::{KeyRange, KeyRev, SharedIndex};

/// Keys read from the index per hold of its read lock: a few hundred microseconds of the
/// writer's time at most.
pub(crate) const SLICE: usize = 4096;

/// What a record read under the index's lock (a keys-only entry's lease) counts for against
/// [`SLICE`], in index entries: an LMDB lookup and a checksum against a step of the tree.
const LOOKUP: usize = 16;

/// Answers whose kvs fields are smaller are copied when read rather than when written.
pub(crate) const COPY_BELOW: usize = 64 * 1024;

/// How an answer is produced (tests try every way against the message path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Way {
    /// Answers whose kvs fields are smaller are copied when read.
    pub copy_below: usize,
    /// Keep where the records are when the transaction allows it, rather than look them up
    /// again when writing.
    pub keep_lent: bool,
}

impl Way {
    pub(crate) const SERVED: Way = Way {
        copy_below: COPY_BELOW,
        keep_lent: true,
    };
}

/// Field 2 of `RangeResponse`.
const KVS_FIELD: u32 = 2;

/// Whether `req` is answered here rather than by `View::range`.
pub(crate) fn encodable(req: &RangeRequest) -> bool {
    // Keys ascending: NONE with another target sorts by that target (see `View::range`).
    let default_order = req.sort_target == SortTarget::Key as i32
        && (req.sort_order == SortOrder::None as i32 || req.sort_order == SortOrder::Ascend as i32);
    let filtered = req.min_mod_revision != 0
        || req.max_mod_revision != 0
        || req.min_create_revision != 0
        || req.max_create_revision != 0;
    // A count is the same whatever the order, filters or limit (`View::range`).
    req.count_only || default_order && !filtered
}

/// What a read view lends a Range encoded here.
pub(crate) struct Source<'a> {
    pub index: &'a SharedIndex,
    pub fresh: &'a Fresh,
    pub engine: &'a Arc<dyn ReadEngine>,
    /// The view's revision and compaction mark.
    pub rev: i64,
    pub compact_rev: i64,
    pub way: Way,
}

/// Reads `req` (which [`encodable`] accepts) on `src`: the records checked and measured, the
/// answer left to write. The header carries only the revision; the caller stamps the rest.
pub(crate) fn unary(src: &Source<'_>, req: &RangeRequest) -> Result<EncodedAnswer, Error> {
    if req.revision > src.rev {
        return Err(EtcdError::FutureRevision.into());
    }
    let at = if req.revision <= 0 {
        src.rev
    } else {
        req.revision
    };
    if at < src.compact_rev {
        return Err(EtcdError::Compacted.into());
    }
    if req.count_only {
        let count = count(src.index, req, at)?;
        return Ok(EncodedAnswer::new(
            Kvs::Copied(Vec::new()),
            src.rev,
            false,
            count,
            0,
        ));
    }
    // Begun before the index is read: a record the index names at `at` that this snapshot
    // lacks was deleted by a compaction the newest view knows of (see `view.rs`).
    let txn = Arc::clone(src.engine).begin_read_owned()?;
    if req.keys_only {
        return keys_only(src, req, at, txn);
    }

    let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
    let want = limit.map_or(usize::MAX, |l| l.saturating_add(1));
    let mut revs = Vec::new();
    walk(src.index, req, at, want, |_, kr| {
        revs.push(kr.modified);
        Ok(1)
    })?;

    let more = limit.is_some_and(|l| revs.len() > l);
    let count = if more {
        count(src.index, req, at)?
    } else {
        revs.len()
    };
    if let Some(l) = limit {
        revs.truncate(l);
    }
    revs.shrink_to_fit();

    // Every record checked and measured; a small answer's copied on the way, a large one's
    // place kept where the transaction guarantees it.
    let mut kvs_len = 0;
    let mut copied = Some(Vec::new());
    let mut lent = Vec::new();
    let stable = {
        let over = FreshTxn {
            table: Table::Key,
            fresh: src.fresh,
            txn: &*txn,
        };
        let stable = src.way.keep_lent && over.lends_for_its_life();
        if stable {
            lent.reserve_exact(revs.len());
        }
        each_record(&over, &revs, &mut |kv| {
            kvs_len += field_len(kv.len());
            if kvs_len >= src.way.copy_below {
                copied = None;
            }
            if let Some(out) = &mut copied {
                put_kv(kv, out);
            }
            if stable {
                lent.push(Lent::of(kv));
            }
        })?;
        stable
    };
    let kvs = match copied {
        Some(bytes) => Kvs::Copied(bytes),
        None => Kvs::Lazy {
            txn,
            fresh: src.fresh.clone(),
            records: if stable {
                drop(revs);
                Records::Lent(lent)
            } else {
                Records::Revisions(revs)
            },
        },
    };
    Ok(EncodedAnswer::new(kvs, src.rev, more, count, kvs_len))
}

/// The number of keys of `req`'s range visible at `at`.
fn count(index: &SharedIndex, req: &RangeRequest, at: i64) -> Result<usize, Error> {
    let index = index.read();
    if at < index.compacted() {
        return Err(EtcdError::Compacted.into());
    }
    Ok(index.count(KeyRange::new(&req.key, &req.range_end), at))
}

/// Walks the first `want` entries of `req`'s range visible at `at`, in key order, in slices,
/// each under a read lock of its own (checked against the index's compaction every time);
/// `f` sees each entry under the lock and says what it cost: 1 for the entry alone,
/// [`LOOKUP`] more for a record it read. A slice ends once it cost [`SLICE`], so the writer
/// waits about as long for a slice whatever `f` does. Returns how many entries it saw.
fn walk(
    index: &SharedIndex,
    req: &RangeRequest,
    at: i64,
    want: usize,
    mut f: impl FnMut(&[u8], &KeyRev) -> Result<usize, Error>,
) -> Result<usize, Error> {
    let mut seen = 0;
    let mut next: Option<Vec<u8>> = None;
    loop {
        let index = index.read();
        if at < index.compacted() {
            return Err(EtcdError::Compacted.into());
        }
        // A single key is one entry at most, so `next` is only ever set for a span.
        let range = KeyRange::new(next.as_deref().unwrap_or(&req.key), &req.range_end);
        let mut spent = 0;
        let mut cut = false;
        let mut last: Option<&[u8]> = None;
        for (key, kr) in index.visible(range, at) {
            if seen == want {
                break;
            }
            if spent >= SLICE {
                cut = true;
                break;
            }
            spent += f(key, &kr)?;
            seen += 1;
            last = Some(key);
        }
        if !cut {
            return Ok(seen);
        }
        // Strictly after the last key taken.
        next = last.map(|k| {
            let mut after = Vec::with_capacity(k.len() + 1);
            after.extend_from_slice(k);
            after.push(0);
            after
        });
    }
}

/// A keys-only Range: every `KeyValue` but its value is in the index (the lease too, unless
/// the key was written again after `at`: then its record is read for it, as `View::kvs` does).
/// A small answer is encoded now; a large one is only measured now and encoded from a second
/// walk of the index when written, straight into the response buffer, so the answer is never
/// held twice (see the module doc).
fn keys_only(
    src: &Source<'_>,
    req: &RangeRequest,
    at: i64,
    txn: Box<dyn ReadTxn + Send>,
) -> Result<EncodedAnswer, Error> {
    let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
    let want = limit.map_or(usize::MAX, |l| l.saturating_add(1));
    let mut kvs_len = 0;
    let mut copied = Some(Vec::new());
    let mut keys = 0;
    let mut more = false;
    {
        let over = FreshTxn {
            table: Table::Key,
            fresh: src.fresh,
            txn: &*txn,
        };
        walk(src.index, req, at, want, |key, kr| {
            if limit == Some(keys) {
                more = true;
                return Ok(1);
            }
            keys += 1;
            let kv = key_fields(&over, key, kr)?;
            kvs_len += field_len(key_only_len(&kv));
            if kvs_len >= src.way.copy_below {
                copied = None;
            }
            if let Some(out) = &mut copied {
                put_key_only(&kv, out);
            }
            Ok(key_cost(kr))
        })?;
    }
    let count = if more {
        count(src.index, req, at)?
    } else {
        keys
    };
    let kvs = match copied {
        Some(bytes) => Kvs::Copied(bytes),
        None => Kvs::KeysOnly(Box::new(KeysLater {
            txn,
            fresh: src.fresh.clone(),
            index: src.index.clone(),
            req: RangeRequest {
                key: req.key.clone(),
                range_end: req.range_end.clone(),
                ..Default::default()
            },
            at,
            keys,
        })),
    };
    Ok(EncodedAnswer::new(kvs, src.rev, more, count, kvs_len))
}

/// The keys-only `KeyValue` of an index entry.
fn key_fields<'k>(over: &FreshTxn<'_>, key: &'k [u8], kr: &KeyRev) -> Result<KeyFields<'k>, Error> {
    let lease = match kr.lease {
        Some(lease) => lease,
        None => lease_at(over, kr.modified)?,
    };
    Ok(KeyFields {
        key,
        create_revision: kr.created.main,
        mod_revision: kr.modified.main,
        version: kr.version,
        lease,
    })
}

/// What [`key_fields`] costs the walk for `kr`.
fn key_cost(kr: &KeyRev) -> usize {
    if kr.lease.is_some() { 1 } else { 1 + LOOKUP }
}

/// The lease the record at `rev` names, read in place and checked.
fn lease_at(over: &FreshTxn<'_>, rev: Revision) -> Result<i64, Error> {
    let mut at = [0u8; REV_BYTES_LEN];
    rev_key(rev, &mut at);
    read_with(over, Table::Key, &at, |stored| match stored {
        // Removed by a compaction accepted after the view (see the module doc).
        None => Err(Error::from(EtcdError::Compacted)),
        Some(stored) => Ok(key_record::decode_fields(&at, stored)?.lease),
    })?
}

/// Field numbers of `mvccpb.KeyValue` that a keys-only answer carries (value, 5, never).
const KV_KEY: u32 = 1;
const KV_INTS: [u32; 4] = [2, 3, 4, 6];

fn kv_ints(kv: &KeyFields<'_>) -> [i64; 4] {
    [kv.create_revision, kv.mod_revision, kv.version, kv.lease]
}

/// The length of `kv` encoded as prost encodes a `KeyValue` with an empty value.
fn key_only_len(kv: &KeyFields<'_>) -> usize {
    let key = if kv.key.is_empty() {
        0
    } else {
        field_len(kv.key.len())
    };
    let ints: usize = kv_ints(kv)
        .iter()
        .filter(|&&v| v != 0)
        .map(|&v| 1 + encoded_len_varint(v as u64))
        .sum();
    key + ints
}

/// One `kvs` field holding `kv` without a value: fields in number order, each only when not
/// its default (proto3), as prost writes it.
fn put_key_only(kv: &KeyFields<'_>, mut out: impl BufMut) {
    encode_key(KVS_FIELD, WireType::LengthDelimited, &mut out);
    encode_varint(key_only_len(kv) as u64, &mut out);
    if !kv.key.is_empty() {
        encode_key(KV_KEY, WireType::LengthDelimited, &mut out);
        encode_varint(kv.key.len() as u64, &mut out);
        out.put_slice(kv.key);
    }
    for (field, v) in KV_INTS.into_iter().zip(kv_ints(kv)) {
        if v != 0 {
            encode_key(field, WireType::Varint, &mut out);
            encode_varint(v as u64, &mut out);
        }
    }
}

/// Where an answer's key-values come from when it is written.
enum Kvs {
    /// Copied when read (a small answer).
    Copied(Vec<u8>),
    /// The transaction the records were checked in, the view's fresh records over it, and
    /// where the records are, in answer order.
    Lazy {
        txn: Box<dyn ReadTxn + Send>,
        fresh: Fresh,
        records: Records,
    },
    /// A large keys-only answer: what it needs to walk the index again when written.
    KeysOnly(Box<KeysLater>),
}

/// A keys-only answer to encode when written: entries visible at `at` do not change while
/// the index is not compacted past it, and the records of leases the index no longer holds
/// are in the transaction (with the view's fresh records over it).
struct KeysLater {
    txn: Box<dyn ReadTxn + Send>,
    fresh: Fresh,
    index: SharedIndex,
    /// The range (key and range end only).
    req: RangeRequest,
    at: i64,
    /// Entries the answer holds.
    keys: usize,
}

/// Where a large answer's records are.
enum Records {
    /// Their revisions, looked up again (and checked again) when written.
    Revisions(Vec<Revision>),
    /// The checked `KeyValue` bytes themselves, as the transaction lent them: only when it
    /// guarantees them for its life ([`ReadTxn::lends_for_its_life`]), so writing the answer
    /// is one copy per record and no lookup.
    Lent(Vec<Lent>),
}

/// A slice a read transaction lent for its life, kept beside it (a reference to it would make
/// the answer borrow from itself).
struct Lent {
    ptr: *const u8,
    len: usize,
}

// SAFETY: a `Lent` is only dereferenced through [`Lent::bytes`] while the transaction (and
// the fresh records) it points into are alive and unchanged; those are `Send`, and the bytes
// are only read.
#[allow(unsafe_code)]
unsafe impl Send for Lent {}

impl Lent {
    fn of(bytes: &[u8]) -> Self {
        Self {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The bytes again.
    ///
    /// # Safety
    /// The transaction that lent them, with `lends_for_its_life` true, and the [`Fresh`] laid
    /// over it must still be alive: [`Kvs::Lazy`] holds all three together and only reads.
    #[allow(unsafe_code)]
    unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: see the function's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Visits the checked `KeyValue` bytes of the records at `revs`, in order.
fn each_record(
    over: &FreshTxn<'_>,
    revs: &[Revision],
    f: &mut dyn FnMut(&[u8]),
) -> Result<(), Error> {
    let mut at = [0u8; REV_BYTES_LEN];
    for rev in revs {
        rev_key(*rev, &mut at);
        read_with(over, Table::Key, &at, |stored| match stored {
            // Removed by a compaction accepted after the view (see the module doc).
            None => Err(Error::from(EtcdError::Compacted)),
            Some(stored) => {
                let kv = key_record::open(&at, stored)?;
                // A body that checks but is no KeyValue is damage too, as for `decode`.
                if key_record::fields(kv).is_none() {
                    return Err(key_record::decode(&at, stored)
                        .err()
                        .unwrap_or_else(|| DamagedRecord::missing(*rev))
                        .into());
                }
                f(kv);
                Ok(())
            }
        })??;
    }
    Ok(())
}

/// One `kvs` field: tag, length, the record's `KeyValue` bytes.
fn put_kv(kv: &[u8], mut out: impl BufMut) {
    encode_key(KVS_FIELD, WireType::LengthDelimited, &mut out);
    encode_varint(kv.len() as u64, &mut out);
    out.put_slice(kv);
}

/// A Range answer waiting to be written (see the module doc).
pub(crate) struct EncodedAnswer {
    kvs: Kvs,
    pub header: ResponseHeader,
    more: bool,
    count: i64,
    /// Bytes of the kvs fields: tags, lengths and record bodies.
    kvs_len: usize,
}

impl EncodedAnswer {
    fn new(kvs: Kvs, rev: i64, more: bool, count: usize, kvs_len: usize) -> Self {
        Self {
            kvs,
            header: ResponseHeader {
                revision: rev,
                ..Default::default()
            },
            more,
            count: count as i64,
            kvs_len,
        }
    }

    /// Whether the answer is written from a transaction (a large answer).
    #[cfg(test)]
    pub(crate) fn is_lazy(&self) -> bool {
        !matches!(self.kvs, Kvs::Copied(_))
    }
}

/// Tag, length and body of one length-delimited field of `len` bytes (field numbers below 16).
fn field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// A revision's key in the `key` table, without allocating ([`Revision::to_bytes`]).
fn rev_key(rev: Revision, out: &mut [u8; REV_BYTES_LEN]) {
    out[..8].copy_from_slice(&rev.main.to_be_bytes());
    out[8] = b'_';
    out[9..].copy_from_slice(&rev.sub.to_be_bytes());
}

impl EncodedRange for EncodedAnswer {
    fn encoded_len(&self) -> usize {
        field_len(self.header.encoded_len())
            + self.kvs_len
            + if self.more { 2 } else { 0 }
            + if self.count != 0 {
                1 + encoded_len_varint(self.count as u64)
            } else {
                0
            }
    }

    /// Fields in number order, each only when not its default, as prost writes a
    /// `RangeResponse`: so the bytes are the ones the message path would send. The caller
    /// reserves [`Self::encoded_len`] first, so the buffer never grows by copying itself.
    fn write(&self, out: &mut dyn BufMut) -> Result<(), EtcdError> {
        let mut out = out;
        prost::encoding::message::encode(1, &self.header, &mut out);
        let written = match &self.kvs {
            Kvs::Copied(bytes) => {
                out.put_slice(bytes);
                bytes.len()
            }
            Kvs::Lazy {
                records: Records::Lent(lent),
                ..
            } => {
                let mut written = 0;
                for l in lent {
                    // SAFETY: `self.kvs` holds the transaction and the fresh records the
                    // slices were lent from, which guaranteed them for the transaction's life.
                    #[allow(unsafe_code)]
                    let kv = unsafe { l.bytes() };
                    put_kv(kv, &mut out);
                    written += field_len(kv.len());
                }
                written
            }
            Kvs::Lazy {
                txn,
                fresh,
                records: Records::Revisions(revs),
            } => {
                let over = FreshTxn {
                    table: Table::Key,
                    fresh,
                    txn: &**txn,
                };
                let mut written = 0;
                each_record(&over, revs, &mut |kv| {
                    put_kv(kv, &mut out);
                    written += field_len(kv.len());
                })?;
                written
            }
            Kvs::KeysOnly(later) => {
                let over = FreshTxn {
                    table: Table::Key,
                    fresh: &later.fresh,
                    txn: &*later.txn,
                };
                let mut written = 0;
                let keys = walk(&later.index, &later.req, later.at, later.keys, |key, kr| {
                    let kv = key_fields(&over, key, kr)?;
                    put_key_only(&kv, &mut out);
                    written += field_len(key_only_len(&kv));
                    Ok(key_cost(kr))
                })?;
                if keys != later.keys {
                    return Err(EtcdError::internal(
                        "mvcc: a keys-only range's entries changed before it was written",
                    ));
                }
                written
            }
        };
        if written != self.kvs_len {
            // The same transaction gave other bytes: never send a malformed answer.
            return Err(EtcdError::internal(
                "mvcc: a range's records changed under its read transaction",
            ));
        }
        if self.more {
            prost::encoding::bool::encode(3, &self.more, &mut out);
        }
        if self.count != 0 {
            prost::encoding::int64::encode(4, &self.count, &mut out);
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
