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
//! Only top-level Ranges in the default order (sort NONE, or KEY ascending) without revision
//! filters, keys-only or count-only are encoded here; the others, and ranges inside txns, go
//! through `View::range`. The encoded answer decodes to exactly what `View::range` answers
//! (`encode_tests.rs` checks it over random histories and requests).

use std::sync::Arc;

use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::{RangeRequest, ResponseHeader};
use actcd_types::key_record::{self, DamagedRecord};
use actcd_types::msg::EncodedRange;
use actcd_types::revision::REV_BYTES_LEN;
use actcd_types::storage::{Fresh, FreshTxn, ReadEngine, ReadTxn, Table, read_with};
use actcd_types::{EtcdError, Revision};
use prost::Message;
use prost::bytes::BufMut;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::error::Error;
use crate::key_index::{KeyRange, SharedIndex};

/// Keys read from the index per hold of its read lock: a few hundred microseconds of the
/// writer's time at most.
pub(crate) const SLICE: usize = 4096;

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
    default_order && !filtered && !req.keys_only && !req.count_only
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
    // Begun before the index is read: a record the index names at `at` that this snapshot
    // lacks was deleted by a compaction the newest view knows of (see `view.rs`).
    let txn = Arc::clone(src.engine).begin_read_owned()?;

    let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
    let want = limit.map_or(usize::MAX, |l| l.saturating_add(1));
    let mut revs = Vec::new();
    let mut next: Option<Vec<u8>> = None;
    loop {
        let index = src.index.read();
        if at < index.compacted() {
            return Err(EtcdError::Compacted.into());
        }
        // A single key is one entry at most, so `next` is only ever set for a span.
        let range = KeyRange::new(next.as_deref().unwrap_or(&req.key), &req.range_end);
        let mut taken = 0;
        let mut last: Option<&[u8]> = None;
        for (key, kr) in index.visible(range, at) {
            if revs.len() == want || taken == SLICE {
                break;
            }
            revs.push(kr.modified);
            taken += 1;
            last = Some(key);
        }
        if taken < SLICE || revs.len() == want {
            break;
        }
        // Strictly after the last key taken.
        next = last.map(|k| {
            let mut after = Vec::with_capacity(k.len() + 1);
            after.extend_from_slice(k);
            after.push(0);
            after
        });
    }

    let more = limit.is_some_and(|l| revs.len() > l);
    let count = if more {
        let index = src.index.read();
        if at < index.compacted() {
            return Err(EtcdError::Compacted.into());
        }
        index.count(KeyRange::new(&req.key, &req.range_end), at)
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
    Ok(EncodedAnswer {
        kvs,
        header: ResponseHeader {
            revision: src.rev,
            ..Default::default()
        },
        more,
        count: count as i64,
        kvs_len,
    })
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
    /// Whether the records wait in a transaction (a large answer).
    #[cfg(test)]
    pub(crate) fn is_lazy(&self) -> bool {
        matches!(self.kvs, Kvs::Lazy { .. })
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
