//! Reading the key space as a stream of events, for watchers catching up from an old revision.
//! The `key` table is keyed by revision, so events in `[from, to]` are one forward scan: a
//! record becomes a Put event, a tombstone a Delete event carrying the key and the deletion
//! revision (the same events the applies send to the watch hub).

use actcd_proto::mvccpb::event::EventType;
use actcd_proto::mvccpb::{Event, KeyValue};
use actcd_types::key_record;
use actcd_types::msg::HistoryChunk;
use actcd_types::storage::{ReadTxn, Table};
use actcd_types::{EtcdError, Revision};

use crate::error::Error;
use crate::range::View;
use crate::store::Store;

impl Store {
    /// Events with a mod revision in `[from, to]` (`to` capped at the current revision), ending
    /// after the revision at which `max_events` is reached, so a revision is never split.
    pub fn history(
        &self,
        from: i64,
        to: i64,
        max_events: usize,
    ) -> Result<HistoryChunk, EtcdError> {
        self.with_view(|v| self.checked(v.history(from, to, max_events), "history"))?
    }
}

impl<R: ReadTxn + ?Sized> View<'_, R> {
    /// [`Store::history`] at the view's revision.
    pub fn history(&self, from: i64, to: i64, max_events: usize) -> Result<HistoryChunk, Error> {
        let current = self.rev;
        let to = to.min(current);
        let compact_revision = self.compact_rev;
        let mut chunk = HistoryChunk {
            events: Vec::new(),
            through: to,
            compact_revision,
            current_revision: current,
        };
        // Below the compact revision history is partly gone: the hub has cancelled watchers
        // that start there, and reads for the others begin at it.
        let from = from.max(compact_revision).max(1);
        if from > to {
            return Ok(chunk);
        }
        let start = Revision::new(from, 0).to_bytes(false);
        let end = to.saturating_add(1).to_be_bytes();
        let max_events = max_events.max(1);
        let mut failed = None;
        {
            self.txn
                .scan(Table::Key, &start, Some(&end), &mut |k, v| {
                    let Some((rev, tombstone)) = Revision::from_bytes(k) else {
                        failed = Some(Error::Corrupt(format!("malformed revision key {k:?}")));
                        return false;
                    };
                    if chunk.events.len() >= max_events
                        && chunk
                            .events
                            .last()
                            .and_then(|e| e.kv.as_ref())
                            .is_some_and(|kv| kv.mod_revision != rev.main)
                    {
                        // Full, and this record opens a new revision: stop before it.
                        chunk.through = rev.main - 1;
                        return false;
                    }
                    match key_record::decode(k, v) {
                        Ok(kv) => {
                            chunk.events.push(if tombstone {
                                Event {
                                    r#type: EventType::Delete as i32,
                                    kv: Some(KeyValue {
                                        key: kv.key,
                                        mod_revision: rev.main,
                                        ..Default::default()
                                    }),
                                    prev_kv: None,
                                }
                            } else {
                                Event {
                                    r#type: EventType::Put as i32,
                                    kv: Some(kv),
                                    prev_kv: None,
                                }
                            });
                            true
                        }
                        Err(damaged) => {
                            failed = Some(Error::Damaged(damaged));
                            false
                        }
                    }
                })
                .map_err(Error::from)
        }?;
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(chunk)
    }
}
