//! [`WalActor`]: thin glue from messages to [`Wal`] calls.

use std::sync::Mutex;

use actcd_types::msg::{Append, ReleaseWal};
use actix::{Actor, Addr, Handler, SyncArbiter, SyncContext};
use tracing::error;

use crate::Wal;

/// Owns the [`Wal`]. Runs in a `SyncArbiter` because every message ends in an fsync.
pub struct WalActor {
    wal: Wal,
}

impl WalActor {
    pub fn new(wal: Wal) -> Self {
        WalActor { wal }
    }

    /// Starts the actor on its own `SyncArbiter` thread (call inside a running System). One
    /// thread, because a WAL has exactly one writer.
    pub fn start(wal: Wal) -> Addr<WalActor> {
        let slot = Mutex::new(Some(wal));
        SyncArbiter::start(1, move || {
            // The factory runs again only if the actor calls `ctx.stop()`, which it never does.
            let wal = slot.lock().ok().and_then(|mut s| s.take());
            WalActor::new(wal.expect("WalActor is started once and never restarted"))
        })
    }

    pub fn wal(&self) -> &Wal {
        &self.wal
    }
}

impl Actor for WalActor {
    type Context = SyncContext<Self>;
}

/// Writes entries then the hard state, one fsync; `Ok` means durable.
impl Handler<Append> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: Append, _: &mut Self::Context) -> Self::Result {
        self.wal.append(msg.hard_state, &msg.entries).map_err(|e| {
            error!(error = %e, entries = msg.entries.len(), "wal: append failed");
            e.to_string()
        })
    }
}

/// Writes a snapshot mark at `index`, fsyncs, deletes segments wholly at or below it.
impl Handler<ReleaseWal> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: ReleaseWal, _: &mut Self::Context) -> Self::Result {
        self.wal
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
