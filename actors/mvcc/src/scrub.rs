//! The background scrub: a slow, steady walk over the whole `key` table that checks every
//! record, so damage is found even in records nobody reads (an old revision kept for a watcher,
//! a key no client asks for) — before a follower's snapshot or a restore would carry it.
//!
//! [`Scrub`] is the plain core: each [`Scrub::step`] reads at most `records_per_step` records
//! or `bytes_per_step` bytes from where the last step stopped, in the read transaction it is
//! handed, and returns what failed its check. [`Scrubber`] is the actor around it, on a thread
//! of its own: on each [`ScrubTick`] (the daemon's ticker sends one a second, with the time
//! since it started — the scrub's only clock) it opens a read transaction, runs one step, and
//! drops the transaction at once. So:
//! - it never holds the writer back: LMDB readers and the writer do not block each other, and
//!   it is not on the store's or the backend's thread;
//! - it never pins one snapshot for long: a transaction lives for one step (at most 1,000
//!   records or 4 MiB, well under a millisecond to a few), so the pages it holds are freed for
//!   reuse at once, and a defragmentation waits for at most one step;
//! - it is rate-limited: at most one step per tick, so at most 1,000 records a second (a
//!   million-record table takes about 17 minutes per pass); a new pass starts no sooner than
//!   `interval` after the last one started (`--experimental-scrub-interval`, 1 hour by
//!   default; 0 turns the scrub off).
//!
//! Records applied after a step passed their place are checked by the next pass; records
//! deleted meanwhile (compaction) are simply not met. A damaged record is reported through
//! [`DamageReport`] (the log, naming its key and revision, and the CORRUPT alarm), once per pass.

use std::time::Duration;

use actcd_types::key_record::{self, DamagedRecord};
use actcd_types::storage::{ReadEngine, ReadTxn, Table};
use actix::{Actor, Arbiter, Context, Handler, Message};

use crate::damage::DamageReport;

/// How much one step reads at most, and how often a pass may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubConfig {
    /// The least time between the starts of two passes; zero turns the scrub off.
    pub interval: Duration,
    pub records_per_step: usize,
    pub bytes_per_step: usize,
}

impl ScrubConfig {
    /// A pass at most every `interval`, 1,000 records or 4 MiB a step.
    pub fn every(interval: Duration) -> Self {
        Self {
            interval,
            records_per_step: 1000,
            bytes_per_step: 4 << 20,
        }
    }
}

/// What one step did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Records checked.
    pub checked: usize,
    /// Records that failed their check.
    pub damaged: Vec<DamagedRecord>,
    /// Whether this step finished a pass.
    pub finished_pass: bool,
}

/// The scrub's position and schedule (see the module doc).
#[derive(Debug)]
pub struct Scrub {
    config: ScrubConfig,
    /// The next key to read in the pass under way; `None` between passes.
    cursor: Option<Vec<u8>>,
    /// When the pass under way (or the last one) started.
    started: Option<Duration>,
    /// Records checked and found damaged in the pass under way.
    checked: u64,
    damaged: u64,
    passes: u64,
}

impl Scrub {
    pub fn new(config: ScrubConfig) -> Self {
        Self {
            config,
            cursor: None,
            started: None,
            checked: 0,
            damaged: 0,
            passes: 0,
        }
    }

    /// Whether a step at `now` has work: a pass is under way, or one is due.
    pub fn due(&self, now: Duration) -> bool {
        !self.config.interval.is_zero()
            && (self.cursor.is_some()
                || self
                    .started
                    .is_none_or(|s| now >= s.saturating_add(self.config.interval)))
    }

    /// Passes finished so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// One step at `now` over `txn`: continues the pass under way, or starts one if due.
    pub fn step(&mut self, txn: &dyn ReadTxn, now: Duration) -> Result<Step, crate::Error> {
        if !self.due(now) {
            return Ok(Step::default());
        }
        let from = match self.cursor.take() {
            Some(c) => c,
            None => {
                self.started = Some(now);
                (self.checked, self.damaged) = (0, 0);
                Vec::new()
            }
        };
        let mut step = Step::default();
        let (mut bytes, mut last) = (0usize, None);
        txn.scan(Table::Key, &from, None, &mut |k, v| {
            if step.checked >= self.config.records_per_step || bytes >= self.config.bytes_per_step {
                last = Some(k.to_vec());
                return false;
            }
            if let Err(d) = key_record::open(k, v) {
                step.damaged.push(d);
            }
            step.checked += 1;
            bytes += k.len() + v.len();
            true
        })?;
        self.checked += step.checked as u64;
        self.damaged += step.damaged.len() as u64;
        match last {
            // The first record not read: the next step starts there.
            Some(next) => self.cursor = Some(next),
            None => {
                step.finished_pass = true;
                self.passes += 1;
                tracing::info!(
                    records = self.checked,
                    damaged = self.damaged,
                    took_secs = now.saturating_sub(self.started.unwrap_or(now)).as_secs(),
                    "key table scrub pass finished"
                );
            }
        }
        Ok(step)
    }
}

/// One scrub step is due (sent by the daemon's ticker); `now` is the time since the ticker
/// started.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct ScrubTick {
    pub now: Duration,
}

/// [`Scrub`] behind a mailbox, reading the engine's committed state.
pub struct Scrubber {
    scrub: Scrub,
    engine: std::sync::Arc<dyn ReadEngine>,
    damage: DamageReport,
}

impl Scrubber {
    pub fn new(
        config: ScrubConfig,
        engine: std::sync::Arc<dyn ReadEngine>,
        damage: DamageReport,
    ) -> Self {
        Self {
            scrub: Scrub::new(config),
            engine,
            damage,
        }
    }

    /// Starts it on a thread of its own (a step waits for a defragmentation's swap; nothing
    /// else should). Must be called inside a running System.
    pub fn start_on_own_thread(self) -> actix::Addr<Self> {
        Self::start_in_arbiter(&Arbiter::new().handle(), move |_| self)
    }
}

impl Actor for Scrubber {
    type Context = Context<Self>;
}

impl Handler<ScrubTick> for Scrubber {
    type Result = ();

    fn handle(&mut self, tick: ScrubTick, _: &mut Context<Self>) {
        if !self.scrub.due(tick.now) {
            return;
        }
        let step = match self.engine.begin_read() {
            Ok(txn) => self.scrub.step(&*txn, tick.now),
            Err(e) => Err(e.into()),
        };
        match step {
            Ok(step) => {
                for d in &step.damaged {
                    self.damage.report(d, "scrub");
                }
                if step.finished_pass {
                    self.engine.release_scanned_pages();
                }
            }
            Err(e) => tracing::warn!(error = %e, "scrub step failed; retried at the next tick"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use actcd_types::Revision;
    use actcd_types::storage::{KvEngine, MemEngine};

    use super::*;

    /// A table of `n` sealed records at revisions 2.., each `size` bytes of value.
    fn table(n: i64, size: usize) -> MemEngine {
        let e = MemEngine::new();
        let mut w = e.write().unwrap();
        for main in 2..2 + n {
            let at = Revision::new(main, 0).to_bytes(false);
            w.put(Table::Key, &at, &key_record::seal(&at, &vec![b'v'; size]))
                .unwrap();
        }
        w.commit().unwrap();
        e
    }

    fn damage(e: &MemEngine, main: i64) {
        let at = Revision::new(main, 0).to_bytes(false);
        let mut v = e.read().unwrap().get(Table::Key, &at).unwrap().unwrap();
        *v.last_mut().unwrap() ^= 0x40;
        let mut w = e.write().unwrap();
        w.put(Table::Key, &at, &v).unwrap();
        w.commit().unwrap();
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn a_pass_walks_the_table_in_bounded_steps_and_names_the_damage() {
        struct Case {
            name: &'static str,
            records: i64,
            size: usize,
            records_per_step: usize,
            bytes_per_step: usize,
            want_steps: Vec<usize>,
        }
        let cases = [
            Case {
                name: "by records",
                records: 25,
                size: 10,
                records_per_step: 10,
                bytes_per_step: 1 << 20,
                want_steps: vec![10, 10, 5],
            },
            Case {
                name: "by bytes (a record over the limit still goes alone)",
                records: 3,
                size: 5000,
                records_per_step: 100,
                bytes_per_step: 4096,
                want_steps: vec![1, 1, 1],
            },
            Case {
                name: "empty table",
                records: 0,
                size: 0,
                records_per_step: 10,
                bytes_per_step: 1 << 20,
                want_steps: vec![0],
            },
        ];
        for c in cases {
            let e = table(c.records, c.size);
            if c.records > 2 {
                damage(&e, 3);
            }
            let mut scrub = Scrub::new(ScrubConfig {
                interval: Duration::from_secs(3600),
                records_per_step: c.records_per_step,
                bytes_per_step: c.bytes_per_step,
            });
            let mut steps = Vec::new();
            let mut damaged = Vec::new();
            for tick in 0.. {
                let step = scrub.step(&*e.read().unwrap(), S * tick).unwrap();
                steps.push(step.checked);
                damaged.extend(step.damaged);
                if step.finished_pass {
                    break;
                }
            }
            assert_eq!(steps, c.want_steps, "{}", c.name);
            assert_eq!(scrub.passes(), 1, "{}", c.name);
            let want: Vec<_> = if c.records > 2 {
                vec![Some(Revision::new(3, 0))]
            } else {
                vec![]
            };
            let got: Vec<_> = damaged.iter().map(|d| d.revision).collect();
            assert_eq!(got, want, "{}", c.name);
        }
    }

    #[test]
    fn passes_start_no_sooner_than_the_interval_and_zero_is_off() {
        let e = table(5, 10);
        let mut scrub = Scrub::new(ScrubConfig {
            interval: S * 10,
            records_per_step: 2,
            bytes_per_step: 1 << 20,
        });
        let mut finished = Vec::new();
        for t in 0..35 {
            let step = scrub.step(&*e.read().unwrap(), S * t).unwrap();
            if step.finished_pass {
                finished.push(t);
            }
        }
        // Three steps a pass (2 + 2 + 1), started at 0, 10, 20, 30.
        assert_eq!(finished, vec![2, 12, 22, 32]);

        let mut off = Scrub::new(ScrubConfig::every(Duration::ZERO));
        assert!(!off.due(Duration::ZERO));
        assert_eq!(off.step(&*e.read().unwrap(), S).unwrap(), Step::default());
    }

    #[test]
    fn records_written_and_deleted_mid_pass_are_handled() {
        let e = table(6, 10);
        let mut scrub = Scrub::new(ScrubConfig {
            interval: S,
            records_per_step: 3,
            bytes_per_step: 1 << 20,
        });
        assert_eq!(scrub.step(&*e.read().unwrap(), S).unwrap().checked, 3);
        // Revision 5 (the next to read) is compacted away, 9 is written.
        let mut w = e.write().unwrap();
        w.delete(Table::Key, &Revision::new(5, 0).to_bytes(false))
            .unwrap();
        let at = Revision::new(9, 0).to_bytes(false);
        w.put(Table::Key, &at, &key_record::seal(&at, b"new"))
            .unwrap();
        w.commit().unwrap();
        damage(&e, 9);
        let step = scrub.step(&*e.read().unwrap(), S * 2).unwrap();
        assert_eq!(step.checked, 3, "6, 7 and 9");
        assert_eq!(step.damaged[0].revision, Some(Revision::new(9, 0)));
        assert!(step.finished_pass);
    }

    #[actix::test]
    async fn the_actor_reports_what_a_tick_finds() {
        use std::sync::Mutex;
        struct Recorder(Arc<Mutex<Vec<String>>>);
        impl Actor for Recorder {
            type Context = Context<Self>;
        }
        impl Handler<actcd_types::msg::RaiseCorrupt> for Recorder {
            type Result = ();
            fn handle(&mut self, m: actcd_types::msg::RaiseCorrupt, _: &mut Context<Self>) {
                self.0.lock().unwrap().push(m.reason);
            }
        }
        let e = Arc::new(table(4, 10));
        damage(&e, 4);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder(seen.clone()).start();
        let scrubber = Scrubber::new(
            ScrubConfig::every(Duration::from_secs(3600)),
            e,
            DamageReport::to(recorder.recipient(), 7),
        )
        .start();
        scrubber.send(ScrubTick { now: S }).await.unwrap();
        // Not due again within the interval: nothing more is reported.
        scrubber.send(ScrubTick { now: S * 2 }).await.unwrap();
        tokio::task::yield_now().await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].contains("revision 4_0"), "{}", seen[0]);
    }
}
