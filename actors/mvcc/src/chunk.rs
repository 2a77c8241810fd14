//! RangeStream's chunks (etcd 3.7): one Range answered as a run of `RangeResponse`s whose
//! in-order merge (kvs appended, header, more and count from the last) is the unary answer.
//!
//! A stream keeps nothing between two chunks but its [`StreamCursor`]: each chunk is read on
//! the newest view, over a read transaction of its own, so a client that reads slowly holds
//! back neither the writer nor compaction. The index's read lock is held only while a chunk's
//! entries are picked (at most [`CHUNK_ENTRIES`] of them, their keys copied), not while their
//! records are read, and once more for the count of the last chunk of a limited stream.
//! What makes chunks from different views one answer:
//! - the first chunk pins the revision `at` every chunk reads at (the request's, else the
//!   view's) and the header revision (the view's, as the unary answer's is);
//! - the index is MVCC, so a newer view read at `at` sees exactly what the first one did,
//!   unless a compaction passed `at` meanwhile: every chunk checks that, and the stream then
//!   ends `Compacted`, as etcd's does;
//! - each chunk starts strictly after the last key sent (that key plus `\0`).
//!
//! Sizes: the first chunk holds at most [`FIRST_CHUNK_KVS`] key-values (etcd's first chunk
//! limit, for a quick first answer); later ones fill up to the caller's byte target, checked
//! on each key-value's encoded size. A key-value bigger than the target is a chunk of its own.
//! A chunk is the last when nothing visible follows it (one entry is looked at past the
//! chunk) or the request's limit is reached, so only an empty answer has an empty last chunk.

use std::sync::LazyLock;

use actcd_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use actcd_types::EtcdError;
use actcd_types::msg::StreamCursor;
use actcd_types::storage::ReadTxn;
use prost::Message;

use crate::error::Error;
use crate::key_index::{KeyRange, KeyRev, SharedIndex, TreeIndex};
use crate::range::View;

/// Most key-values in a stream's first chunk (etcd's `initialStreamChunkLimit`).
pub const FIRST_CHUNK_KVS: usize = 10;

/// Most index entries picked for one chunk under one hold of the index's read lock (a few
/// hundred microseconds of the writer's time at most); a chunk of smaller key-values than its
/// byte target allows ends there.
pub const CHUNK_ENTRIES: usize = 4096;

/// What a chunk is read from: the view's index (locked only while picking entries), its read
/// transaction, and its revision clock.
pub(crate) struct Source<'a, R: ReadTxn + ?Sized> {
    pub index: &'a SharedIndex,
    pub txn: &'a R,
    pub rev: i64,
    pub compact_rev: i64,
}

/// The records of picked entries are read through a [`View`] with no index at hand: reading
/// entries' records never looks at it.
static NO_INDEX: LazyLock<TreeIndex> = LazyLock::new(TreeIndex::new);

/// The next chunk of `req` from `cursor`, advancing `cursor`. The last chunk's header carries
/// only the revision; the caller stamps the rest.
pub(crate) fn next_chunk<R: ReadTxn + ?Sized>(
    src: &Source<'_, R>,
    req: &RangeRequest,
    cursor: &mut StreamCursor,
    target_bytes: usize,
) -> Result<RangeResponse, Error> {
    if cursor.done {
        return Err(EtcdError::internal("actcd: range stream read past its end").into());
    }
    let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
    let sent = usize::try_from(cursor.sent).unwrap_or(0);
    let mut room = limit.map_or(usize::MAX, |l| l.saturating_sub(sent));
    if cursor.chunks == 0 {
        room = room.min(FIRST_CHUNK_KVS);
    }
    room = room.min(CHUNK_ENTRIES);

    // Under the index's read lock: the revision rules and the chunk's entries, and whether a
    // visible key follows them.
    let (entries, mut follows) = {
        let index = src.index.read();
        if cursor.chunks == 0 {
            if req.revision > src.rev {
                return Err(EtcdError::FutureRevision.into());
            }
            cursor.header_revision = src.rev;
            cursor.at = if req.revision <= 0 {
                src.rev
            } else {
                req.revision
            };
        }
        if cursor.at < src.compact_rev.max(index.compacted()) {
            return Err(EtcdError::Compacted.into());
        }
        let start = cursor.next.as_deref().unwrap_or(&req.key);
        let mut entries: Vec<(Vec<u8>, KeyRev)> = Vec::new();
        let mut follows = false;
        for (key, kr) in index.visible(KeyRange::new(start, &req.range_end), cursor.at) {
            if entries.len() == room {
                follows = true;
                break;
            }
            entries.push((key.to_vec(), kr));
        }
        (entries, follows)
    };

    // The records, without the lock, up to the byte target.
    let view = View {
        index: &NO_INDEX,
        txn: src.txn,
        rev: src.rev,
        compact_rev: src.compact_rev,
        concurrent: true,
    };
    let mut kvs = Vec::with_capacity(entries.len());
    let mut bytes = 0usize;
    for (key, kr) in &entries {
        let Some(kv) = view.kvs(&[(key.as_slice(), *kr)], req.keys_only)?.pop() else {
            break;
        };
        // As field 2 of the RangeResponse: tag, length, body.
        let len = kv.encoded_len();
        let size = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
        if !kvs.is_empty() && bytes + size > target_bytes {
            follows = true;
            break;
        }
        bytes += size;
        kvs.push(kv);
    }

    cursor.chunks += 1;
    cursor.sent += kvs.len() as i64;
    if let Some(last) = kvs.last() {
        let mut next = Vec::with_capacity(last.key.len() + 1);
        next.extend_from_slice(&last.key);
        next.push(0);
        cursor.next = Some(next);
    }
    let limited = limit.is_some_and(|l| usize::try_from(cursor.sent).unwrap_or(0) >= l);
    cursor.done = !follows || limited;
    if !cursor.done {
        return Ok(RangeResponse {
            kvs,
            ..Default::default()
        });
    }

    // The last chunk: unary Range's count is every key in the range, whatever the limit.
    let more = limited && follows;
    let rest = if more {
        let index = src.index.read();
        if cursor.at < index.compacted() {
            return Err(EtcdError::Compacted.into());
        }
        let from = cursor.next.as_deref().unwrap_or(&req.key);
        index.count(KeyRange::new(from, &req.range_end), cursor.at) as i64
    } else {
        0
    };
    Ok(RangeResponse {
        header: Some(ResponseHeader {
            revision: cursor.header_revision,
            ..Default::default()
        }),
        kvs,
        more,
        count: cursor.sent + rest,
    })
}

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
