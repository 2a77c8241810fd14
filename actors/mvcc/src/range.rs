//! Reading the key space at a revision: the index picks the revisions, the backend holds the
//! records. Shared by top-level Range (a read transaction on the last commit) and by ranges,
//! compares and prev-kv reads inside a write (the batch's write transaction, which sees the
//! batch's own writes).

use std::cmp::Ordering;

use actcd_proto::etcdserverpb::range_request::{SortOrder, SortTarget};
use actcd_proto::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use actcd_proto::mvccpb::KeyValue;
use actcd_types::key_record;
use actcd_types::storage::{ReadTxn, Table};
use actcd_types::{EtcdError, Revision};

use crate::error::Error;
use crate::key_index::{KeyRange, KeyRev, TreeIndex};

/// The key space as one reader sees it.
pub(crate) struct View<'a, R: ReadTxn + ?Sized> {
    pub index: &'a TreeIndex,
    pub txn: &'a R,
    /// The revision a read without one is served at.
    pub rev: i64,
    /// Reads below this revision fail with `Compacted` (-1 before any compaction, as in etcd).
    pub compact_rev: i64,
    /// Whether `txn` may be newer than `index` (a published [`crate::ReadView`] read beside
    /// the writer): a compaction accepted after the index was copied may have deleted a record
    /// it names. Such a record was superseded at or below that compaction, so the read's
    /// revision is compacted now: the answer is `Compacted`, not corruption.
    pub concurrent: bool,
}

impl<R: ReadTxn + ?Sized> View<'_, R> {
    /// The record of the write at `rev`.
    /// Checked ([`key_record::decode`]): a damaged record is [`Error::Damaged`], never data.
    pub fn record(&self, rev: Revision) -> Result<KeyValue, Error> {
        let at = rev.to_bytes(false);
        let bytes = self
            .txn
            .get(Table::Key, &at)?
            .ok_or_else(|| self.missing(rev))?;
        Ok(key_record::decode(&at, &bytes)?)
    }

    /// The key's current record, if it exists at the view's revision.
    pub fn get(&self, key: &[u8]) -> Result<Option<KeyValue>, Error> {
        self.index
            .get(key, self.rev)
            .map(|kr| self.record(kr.modified))
            .transpose()
    }

    /// etcd's Range (`applierV3backend.Range` over `rangeKeys`). The header carries only the
    /// revision; the caller stamps the rest.
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, Error> {
        if req.revision > self.rev {
            return Err(EtcdError::FutureRevision.into());
        }
        let at = if req.revision <= 0 {
            self.rev
        } else {
            req.revision
        };
        if at < self.compact_rev {
            return Err(EtcdError::Compacted.into());
        }
        let header = Some(ResponseHeader {
            revision: self.rev,
            ..Default::default()
        });
        let range = KeyRange::new(&req.key, &req.range_end);
        if req.count_only {
            let count = self.index.count(range, at) as i64;
            return Ok(RangeResponse {
                header,
                kvs: vec![],
                more: false,
                count,
            });
        }

        let filtered = req.min_mod_revision != 0
            || req.max_mod_revision != 0
            || req.min_create_revision != 0
            || req.max_create_revision != 0;
        // Like etcd: a requested order or a filter means reading everything and truncating
        // afterwards; otherwise read one past the limit to learn `more`. (A non-KEY target with
        // order NONE sorts only that prefix — etcd does the same.)
        let read_all = req.sort_order != SortOrder::None as i32 || filtered;
        let fetch = match usize::try_from(req.limit) {
            Ok(limit) if limit > 0 && !read_all => limit.saturating_add(1),
            _ => 0,
        };
        let (mut entries, total) = self.index.revisions(range, at, fetch);

        // The index knows each visible write's create and mod revisions, so filters and every
        // sort but VALUE run before any record is read.
        let keep = |kr: &KeyRev| {
            let (m, c) = (kr.modified.main, kr.created.main);
            !(req.max_mod_revision != 0 && m > req.max_mod_revision
                || req.min_mod_revision != 0 && m < req.min_mod_revision
                || req.max_create_revision != 0 && c > req.max_create_revision
                || req.min_create_revision != 0 && c < req.min_create_revision)
        };
        entries.retain(|(_, kr)| keep(kr));

        let mut order = req.sort_order;
        if req.sort_target != SortTarget::Key as i32 && order == SortOrder::None as i32 {
            order = SortOrder::Ascend as i32;
        }
        let descend = order == SortOrder::Descend as i32;
        let sorting = order == SortOrder::Ascend as i32 || descend;
        let by_value = sorting && req.sort_target == SortTarget::Value as i32;

        let limit = usize::try_from(req.limit).ok().filter(|&l| l > 0);
        let (mut kvs, more) = if by_value {
            let mut kvs = self.read(&entries)?;
            sort_by(&mut kvs, descend, |a, b| a.value.cmp(&b.value));
            let more = truncate(&mut kvs, limit);
            (kvs, more)
        } else {
            if sorting {
                sort_entries(&mut entries, req.sort_target, descend);
            }
            let more = truncate(&mut entries, limit);
            (self.kvs(&entries, req.keys_only)?, more)
        };
        if req.keys_only {
            // Only the VALUE sort reads values on purpose.
            for kv in &mut kvs {
                kv.value.clear();
            }
        }
        Ok(RangeResponse {
            header,
            kvs,
            more,
            count: total as i64,
        })
    }

    /// The key-values of `entries`, in their order; without values when `keys_only`. The one
    /// place index entries become answers (Range and RangeStream's chunks).
    ///
    /// Keys-only answers come from the index: key, create and mod revision and version are
    /// the entry's, and so is the lease when the entry is its key's latest write (the index
    /// keeps that one lease). Only a key rewritten since the read's revision has its record
    /// read, for the lease it named then. Unlike etcd 3.7's index path, the lease is kept, as
    /// etcd 3.5 answers.
    pub fn kvs(
        &self,
        entries: &[(&[u8], KeyRev)],
        keys_only: bool,
    ) -> Result<Vec<KeyValue>, Error> {
        if !keys_only {
            return self.read(entries);
        }
        entries
            .iter()
            .map(|&(key, kr)| {
                let lease = match kr.lease {
                    Some(lease) => lease,
                    None => self.record_fields(kr.modified, |f| f.lease)?,
                };
                Ok(KeyValue {
                    key: key.to_vec(),
                    create_revision: kr.created.main,
                    mod_revision: kr.modified.main,
                    version: kr.version,
                    value: Vec::new(),
                    lease,
                })
            })
            .collect()
    }

    /// `f` of the fields of the record at `rev` other than its value, read in place, checked.
    fn record_fields<T>(
        &self,
        rev: Revision,
        f: impl FnOnce(key_record::KeyFields<'_>) -> T,
    ) -> Result<T, Error> {
        let at = rev.to_bytes(false);
        let bytes = self
            .txn
            .get(Table::Key, &at)?
            .ok_or_else(|| self.missing(rev))?;
        Ok(f(key_record::decode_fields(&at, &bytes)?))
    }

    /// A record the index names is not in the table.
    fn missing(&self, rev: Revision) -> Error {
        if self.concurrent {
            Error::from(EtcdError::Compacted)
        } else {
            Error::Corrupt(format!("range failed to find revision {rev:?}"))
        }
    }

    fn read(&self, entries: &[(&[u8], KeyRev)]) -> Result<Vec<KeyValue>, Error> {
        entries
            .iter()
            .map(|(_, kr)| self.record(kr.modified))
            .collect()
    }
}

/// Cuts `v` to `limit`; true if that dropped anything (the response's `more`).
fn truncate<T>(v: &mut Vec<T>, limit: Option<usize>) -> bool {
    match limit {
        Some(limit) if v.len() > limit => {
            v.truncate(limit);
            true
        }
        _ => false,
    }
}

/// Stable, so keys that tie stay in ascending key order in both directions.
fn sort_by<T>(v: &mut [T], descend: bool, cmp: impl Fn(&T, &T) -> Ordering) {
    if descend {
        v.sort_by(|a, b| cmp(b, a));
    } else {
        v.sort_by(cmp);
    }
}

fn sort_entries(entries: &mut [(&[u8], KeyRev)], target: i32, descend: bool) {
    match SortTarget::try_from(target) {
        // Entries come in ascending key order already.
        Ok(SortTarget::Key) if descend => entries.reverse(),
        Ok(SortTarget::Key) => {}
        Ok(SortTarget::Version) => sort_by(entries, descend, |a, b| a.1.version.cmp(&b.1.version)),
        Ok(SortTarget::Create) => {
            sort_by(entries, descend, |a, b| {
                a.1.created.main.cmp(&b.1.created.main)
            });
        }
        Ok(SortTarget::Mod) => {
            sort_by(entries, descend, |a, b| {
                a.1.modified.main.cmp(&b.1.modified.main)
            });
        }
        // VALUE is sorted on records by the caller; preflight rejects unknown targets.
        Ok(SortTarget::Value) | Err(_) => {}
    }
}
