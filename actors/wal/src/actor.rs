//! [`WalActor`]: thin glue from messages to [`Wal`] calls.

use actcd_types::msg::{Append, ReleaseWal};
use actix::{Actor, Addr, Arbiter, Context, Handler};
use tracing::error;

use crate::Wal;

/// Owns the [`Wal`]. Every message ends in an fsync, which blocks the thread it runs on: see
/// [`WalActor::start`] and [`WalActor::start_here`] for where that may be.
pub struct WalActor {
    wal: Wal,
}

impl WalActor {
    pub fn new(wal: Wal) -> Self {
        WalActor { wal }
    }

    /// Starts the actor on a thread of its own (an `Arbiter`; call inside a running System),
    /// so its fsyncs block nobody else.
    pub fn start(wal: Wal) -> Addr<WalActor> {
        let arbiter = Arbiter::new();
        WalActor::start_in_arbiter(&arbiter.handle(), move |_| WalActor::new(wal))
    }

    /// Starts the actor on the calling thread: its fsyncs then block the other actors there
    /// while they run, in exchange for two cross-thread wake-ups fewer per Ready.
    pub fn start_here(wal: Wal) -> Addr<WalActor> {
        WalActor::new(wal).start()
    }

    pub fn wal(&self) -> &Wal {
        &self.wal
    }
}

impl Actor for WalActor {
    type Context = Context<Self>;
}

/// Writes entries then the hard state, one fsync; `Ok` means durable.
impl Handler<Append> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: Append, _: &mut Context<Self>) -> Self::Result {
        self.wal.append(msg.hard_state, &msg.entries).map_err(|e| {
            error!(error = %e, entries = msg.entries.len(), "wal: append failed");
            e.to_string()
        })
    }
}

/// Writes a snapshot mark at `index`, fsyncs, deletes segments wholly at or below it.
impl Handler<ReleaseWal> for WalActor {
    type Result = Result<(), String>;

    fn handle(&mut self, msg: ReleaseWal, _: &mut Context<Self>) -> Self::Result {
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
