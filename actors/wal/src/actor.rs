//! [`WalActor`]: thin glue from messages to [`Wal`] calls.

use std::sync::{Arc, Mutex, MutexGuard};

use actcd_types::msg::{Append, GetFsyncStats, ReleaseWal};
use actix::{Actor, Addr, Arbiter, Context, Handler};
use tracing::error;

use crate::Wal;

/// Owns the [`Wal`]. Every message ends in an fsync, which blocks the thread it runs on, so it
/// runs on a thread of its own ([`WalActor::start`]).
///
/// The WAL sits behind a mutex only so that the raft node may also write a small Ready itself
/// through an [`InlineWal`] (see the crate doc, "Inline appends"); the raft node waits for each
/// append before the next, so the lock is never contended on the write path.
pub struct WalActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    wal: Arc<Mutex<Wal>>,
}

/// The raft node's direct handle on the WAL, for Readies small enough that writing them on its
/// own thread beats two thread hand-offs.
#[derive(Clone)]
pub struct InlineWal(Arc<Mutex<Wal>>);

impl InlineWal {
    /// Writes and fsyncs like an `Append` message, on the calling thread.
    pub fn append(&self, msg: &Append) -> Result<(), String> {
        append(&mut lock(&self.0), msg)
    }
}

fn lock(wal: &Mutex<Wal>) -> MutexGuard<'_, Wal> {
    // A panic while holding it would have stopped the server; the WAL itself stays consistent
    // (a torn record is repaired on open), so a poisoned lock is still usable.
    wal.lock().unwrap_or_else(|p| p.into_inner())
}

fn append(wal: &mut Wal, msg: &Append) -> Result<(), String> {
    wal.append(msg.hard_state, &msg.entries).map_err(|e| {
        error!(error = %e, entries = msg.entries.len(), "wal: append failed");
        e.to_string()
    })
}

impl WalActor {
    pub fn new(wal: Wal) -> Self {
        WalActor {
            meter: actcd_types::meter::Meter::new(),
            wal: Arc::new(Mutex::new(wal)),
        }
    }

    /// A handle through which the raft node can append on its own thread.
    pub fn inline(&self) -> InlineWal {
        InlineWal(self.wal.clone())
    }

    /// Starts `self` on a thread of its own (see [`Self::start`]).
    pub fn start_on_own_thread(self) -> Addr<WalActor> {
        let arbiter = Arbiter::new();
        WalActor::start_in_arbiter(&arbiter.handle(), move |_| self)
    }

    /// Starts the actor on a thread of its own (an `Arbiter`; call inside a running System),
    /// so its fsyncs block nobody else.
    pub fn start(wal: Wal) -> Addr<WalActor> {
        WalActor::new(wal).start_on_own_thread()
    }
}

impl Actor for WalActor {
    type Context = Context<Self>;
}

/// Writes entries then the hard state, one fsync; `Ok` means durable.
/// The fsync latencies so far, for `/metrics` (asked behind the appends already queued).
impl Handler<GetFsyncStats> for WalActor {
    type Result = actix::MessageResult<GetFsyncStats>;

    fn handle(&mut self, _: GetFsyncStats, _: &mut Context<Self>) -> Self::Result {
        actix::MessageResult::<GetFsyncStats>(lock(&self.wal).fsync_stats())
    }
}

impl Handler<Append> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: Append, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("Append");
        append(&mut lock(&self.wal), &msg)
    }
}

/// Writes a snapshot mark at `index`, fsyncs, deletes segments wholly at or below it.
impl Handler<ReleaseWal> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: ReleaseWal, _: &mut Context<Self>) -> Self::Result {
        let _timer = self.meter.start("ReleaseWal");
        lock(&self.wal)
            .release(msg.index, msg.term, &msg.conf_state)
            .map_err(|e| {
                error!(error = %e, index = msg.index, "wal: release failed");
                e.to_string()
            })
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
            let addr = WalActor::start(wal);
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
}

actcd_types::impl_mailbox_probe!(WalActor, meter);
