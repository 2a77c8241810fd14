//! RangeStream's chunks (etcd 3.7): one Range answered as a run of `RangeResponse`s whose
//! in-order merge (kvs appended, header, more and count from the last) is the unary answer.
//!
//! A stream keeps nothing between two chunks but its [`StreamCursor`]: each chunk is read on
//! the newest view, over a read transaction of its own and under the index's read lock for
//! that chunk only, so a client that reads slowly holds back neither the writer nor
//! compaction. What makes chunks from different views one answer:
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

use actcd_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use actcd_types::EtcdError;
use actcd_types::msg::StreamCursor;
use actcd_types::storage::ReadTxn;
use prost::Message;

use crate::error::Error;
use crate::key_index::KeyRange;
use crate::range::View;

/// Most key-values in a stream's first chunk (etcd's `initialStreamChunkLimit`).
pub const FIRST_CHUNK_KVS: usize = 10;

/// The next chunk of `req` from `cursor` on `view`, advancing `cursor`. The last chunk's
/// header carries only the revision; the caller stamps the rest.
pub(crate) fn next_chunk<R: ReadTxn + ?Sized>(
    view: &View<'_, R>,
    req: &RangeRequest,
    cursor: &mut StreamCursor,
    target_bytes: usize,
) -> Result<RangeResponse, Error> {
    if cursor.done {
        return Err(EtcdError::internal("actcd: range stream read past its end").into());
    }
    if cursor.chunks == 0 {
        if req.revision > view.rev {
            return Err(EtcdError::FutureRevision.into());
        }
        cursor.header_revision = view.rev;
        cursor.at = if req.revision <= 0 {
            view.rev
        } else {
            req.revision
        };
    }
    if cursor.at < view.compact_rev {
        return Err(EtcdError::Compacted.into());
    }

    let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
    let sent = usize::try_from(cursor.sent).unwrap_or(0);
    let mut room = limit.map_or(usize::MAX, |l| l.saturating_sub(sent));
    if cursor.chunks == 0 {
        room = room.min(FIRST_CHUNK_KVS);
    }

    let start = cursor.next.as_deref().unwrap_or(&req.key);
    let range = KeyRange::new(start, &req.range_end);
    let mut kvs = Vec::new();
    let mut bytes = 0usize;
    // Whether a visible key follows the chunk.
    let mut follows = false;
    for entry in view.index.visible(range, cursor.at) {
        if kvs.len() >= room {
            follows = true;
            break;
        }
        let Some(kv) = view.kvs(&[entry], req.keys_only)?.pop() else {
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
        let from = cursor.next.as_deref().unwrap_or(&req.key);
        view.index
            .count(KeyRange::new(from, &req.range_end), cursor.at) as i64
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
