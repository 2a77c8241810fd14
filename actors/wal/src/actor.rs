//! [`WalActor`]: thin glue from messages to [`Wal`] calls, and where each call runs.

use actcd_types::msg::{Append, GetFsyncStats, ReleaseWal};
use actix::prelude::*;
use tracing::error;

use crate::{Wal, WalError};

/// Appends with at most this many entries are written and fsynced on the actor's own thread;
/// larger ones, and releases, on a blocking-pool thread (see the crate doc, "Where the fsync
/// runs"). One client's writes come one entry per Ready.
pub const INLINE_MAX_ENTRIES: usize = 2;

/// The [`Wal`]'s only owner. Start it on the raft node's thread (`WalActor::new(wal).start()`
/// there): a small append is then a mailbox push on the same thread, and a large one leaves
/// the thread free while it syncs.
pub struct WalActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    /// `None` only while a write runs on the blocking pool; no message is handled meanwhile
    /// (the handler's future is atomic), so no handler ever finds it missing.
    wal: Option<Wal>,
}

fn append(wal: &mut Wal, msg: &Append) -> Result<(), String> {
    wal.append(msg.hard_state, &msg.entries).map_err(|e| {
        error!(error = %e, entries = msg.entries.len(), "wal: append failed");
        e.to_string()
    })
}

fn release(wal: &mut Wal, msg: &ReleaseWal) -> Result<(), String> {
    wal.release(msg.index, msg.term, &msg.conf_state)
        .map_err(|e| {
            error!(error = %e, index = msg.index, "wal: release failed");
            e.to_string()
        })
}

/// What a handler answers when the WAL is gone (a blocking-pool thread panicked holding it).
fn lost() -> String {
    WalError::Failed.to_string()
}

impl WalActor {
    pub fn new(wal: Wal) -> Self {
        WalActor {
            meter: actcd_types::meter::Meter::new(),
            wal: Some(wal),
        }
    }

    /// Runs `op` on the WAL here, on the actor's thread.
    fn in_place(
        &mut self,
        op: impl FnOnce(&mut Wal) -> Result<(), String>,
    ) -> AtomicResponse<Self, Result<(), String>> {
        let res = self.wal.as_mut().map_or_else(|| Err(lost()), op);
        AtomicResponse::new(Box::pin(fut::ready(res)))
    }

    /// Moves the WAL to a blocking-pool thread, runs `op` there and takes the WAL back. The
    /// actor handles nothing else until then (`AtomicResponse`), but its thread is free.
    fn off_thread<M: Send + 'static>(
        &mut self,
        name: &'static str,
        msg: M,
        op: fn(&mut Wal, &M) -> Result<(), String>,
    ) -> AtomicResponse<Self, Result<(), String>> {
        let Some(mut wal) = self.wal.take() else {
            return AtomicResponse::new(Box::pin(fut::ready(Err(lost()))));
        };
        let timer = self.meter.start(name);
        let work = tokio::task::spawn_blocking(move || {
            let res = op(&mut wal, &msg);
            (wal, res)
        });
        AtomicResponse::new(Box::pin(work.into_actor(self).map(
            move |joined, act, _| {
                drop(timer);
                match joined {
                    Ok((wal, res)) => {
                        act.wal = Some(wal);
                        res
                    }
                    Err(e) => {
                        error!(error = %e, "wal: the writing thread panicked; the WAL is lost");
                        Err(lost())
                    }
                }
            },
        )))
    }
}

impl Actor for WalActor {
    type Context = Context<Self>;
}

/// The fsync latencies so far, for `/metrics` (asked behind the appends already queued).
impl Handler<GetFsyncStats> for WalActor {
    type Result = MessageResult<GetFsyncStats>;

    fn handle(&mut self, _: GetFsyncStats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.wal.as_ref().map(Wal::fsync_stats).unwrap_or_default())
    }
}

/// Writes entries then the hard state, one fsync; `Ok` means durable. Up to
/// [`INLINE_MAX_ENTRIES`] entries on this thread, more on the blocking pool.
impl Handler<Append> for WalActor {
    type Result = AtomicResponse<Self, Result<(), String>>;

    fn handle(&mut self, msg: Append, _: &mut Context<Self>) -> Self::Result {
        if msg.entries.len() > INLINE_MAX_ENTRIES {
            return self.off_thread("AppendOffThread", msg, append);
        }
        let _timer = self.meter.start("Append");
        self.in_place(|wal| append(wal, &msg))
    }
}

/// Writes a snapshot mark at `index`, fsyncs, deletes segments wholly at or below it; on the
/// blocking pool (an fsync, unlinks and a directory fsync: not for the raft node's thread).
impl Handler<ReleaseWal> for WalActor {
    type Result = AtomicResponse<Self, Result<(), String>>;

    fn handle(&mut self, msg: ReleaseWal, _: &mut Context<Self>) -> Self::Result {
        self.off_thread("ReleaseWal", msg, release)
    }
}

#[cfg(test)]
mod tests {
    use actcd_types::msg::{HardState, WalEntry};

    use super::*;

    fn entry(index: u64) -> WalEntry {
        WalEntry {
            index,
            term: 1,
            data: vec![index as u8; 3],
        }
    }

    #[test]
    fn messages_reach_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::create(dir.path(), b"meta").unwrap();
        let hs = HardState {
            term: 1,
            vote: 1,
            commit: 2,
        };

        actix::System::new().block_on(async {
            let addr = WalActor::new(wal).start();
            let ok = addr
                .send(Append {
                    hard_state: Some(hs),
                    entries: (1..=3).map(entry).collect(),
                })
                .await;
            assert_eq!(ok.unwrap(), Ok(()));
            let ok = addr
                .send(ReleaseWal {
                    index: 2,
                    term: 1,
                    conf_state: b"cs".to_vec(),
                })
                .await;
            assert_eq!(ok.unwrap(), Ok(()));
            // A gap is refused, and the error reaches the sender as its message.
            let err = addr
                .send(Append {
                    hard_state: None,
                    entries: vec![entry(9)],
                })
                .await
                .unwrap();
            assert_eq!(
                err,
                Err("wal: refusing to write: entry 9 leaves a gap after 3".to_string())
            );
        });

        let (_, got) = Wal::open(dir.path()).unwrap();
        assert_eq!(got.hard_state, hs);
        assert_eq!(got.snapshot.map(|s| s.index), Some(2));
        assert_eq!(got.entries, vec![entry(3)]);
    }

    #[test]
    fn small_appends_are_written_in_place_and_large_ones_and_releases_off_thread() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::create(dir.path(), b"meta").unwrap();
        let n = INLINE_MAX_ENTRIES as u64;
        actix::System::new().block_on(async {
            let addr = WalActor::new(wal).start();
            let appends = [1..=n, n + 1..=n + 1, n + 2..=3 * n + 2];
            for entries in appends {
                let msg = Append {
                    hard_state: None,
                    entries: entries.map(entry).collect(),
                };
                assert_eq!(addr.send(msg).await.unwrap(), Ok(()));
            }
            let release = ReleaseWal {
                index: 1,
                term: 1,
                conf_state: vec![],
            };
            assert_eq!(addr.send(release).await.unwrap(), Ok(()));
            let meter = addr.send(actcd_types::meter::GetMeter).await.unwrap();
            let seen = meter.answer(&actcd_types::meter::MailboxProbe {
                sent_at: std::time::Instant::now(),
                handled_at_send: None,
            });
            let count = |name: &str| seen.by_message.get(name).map_or(0, |s| s.count);
            assert_eq!(
                (
                    count("Append"),
                    count("AppendOffThread"),
                    count("ReleaseWal")
                ),
                (2, 1, 1)
            );
            let stats = addr.send(GetFsyncStats).await.unwrap();
            assert_eq!(stats.count, 4, "one fsync per write, wherever it ran");
        });

        let (_, got) = Wal::open(dir.path()).unwrap();
        assert_eq!(got.snapshot.map(|s| s.index), Some(1));
        let want: Vec<_> = (2..=3 * n + 2).map(entry).collect();
        assert_eq!(got.entries, want, "every entry, in order");
    }
}

impl WalActor {
    /// Bytes written (etcd's `etcd_disk_wal_write_bytes_total`; absent while a write runs on
    /// the blocking pool, which holds the WAL).
    fn samples(&self) -> Vec<actcd_types::meter::Sample> {
        self.wal
            .as_ref()
            .map(|w| {
                actcd_types::meter::Sample::value(
                    "etcd_disk_wal_write_bytes_total",
                    w.written_bytes() as f64,
                )
            })
            .into_iter()
            .collect()
    }
}

actcd_types::impl_mailbox_probe!(WalActor, meter, samples);
