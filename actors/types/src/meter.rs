//! What each actor's mailbox and handlers are doing, for `/metrics`.
//!
//! An actor keeps a [`Meter`] of its own and times the handlers that carry its load with
//! [`Meter::start`]; only the actor writes it. The front asks every actor with a [`MailboxProbe`]
//! sent through the ordinary mailbox, behind whatever is queued there; the answer is the
//! meter's [`MeterSnapshot`] plus, measured by the probe itself:
//!
//! - the **mailbox depth**: how many timed messages the actor handled between the probe's
//!   sending and its handling, which (the mailbox being first in, first out) is how many were
//!   queued ahead of it when it was sent;
//! - the **mailbox wait**: how long the probe waited in the mailbox.
//!
//! actix doesn't expose a mailbox's length, and counting every send at every sender would put
//! an atomic on each hot path in the system; the probe costs one message per actor per scrape.
//! Untimed messages (rare control messages) are not counted in the depth.
//!
//! The same answer carries the actor's own quantities ([`Sample`]s under etcd's metric names,
//! e.g. the MVCC store's put and delete counts): an actor that has some passes a third
//! argument to [`impl_mailbox_probe!`], a method that reads its plain counters. The numbers
//! reach the front by this message, not through shared atomics.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use actix::Message;

/// Handling-time histogram buckets, seconds (upper bounds).
pub const HANDLE_BUCKETS: [f64; 10] = [
    0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 1.0,
];

/// One message type's handling: count, total time, and the histogram (not cumulative).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HandleStats {
    pub count: u64,
    pub seconds: f64,
    /// Counts per [`HANDLE_BUCKETS`] bound; the last slot is above every bound.
    pub buckets: [u64; HANDLE_BUCKETS.len() + 1],
}

impl HandleStats {
    fn observe(&mut self, secs: f64) {
        self.count += 1;
        self.seconds += secs;
        let i = HANDLE_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(HANDLE_BUCKETS.len());
        self.buckets[i] += 1;
    }
}

/// An actor's own meter.
#[derive(Debug, Default)]
pub struct Meter {
    /// Timed messages handled so far (all types).
    handled: AtomicU64,
    by_message: std::sync::Mutex<BTreeMap<&'static str, HandleStats>>,
}

/// Times one handler run; records when dropped (early returns included).
pub struct Timer {
    meter: Arc<Meter>,
    message: &'static str,
    started: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        let secs = self.started.elapsed().as_secs_f64();
        self.meter.handled.fetch_add(1, Ordering::Relaxed);
        self.meter
            .by_message
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(self.message)
            .or_default()
            .observe(secs);
    }
}

impl Meter {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Starts timing one `message` handler: keep the timer until the handler returns.
    pub fn start(self: &Arc<Self>, message: &'static str) -> Timer {
        Timer {
            meter: self.clone(),
            message,
            started: Instant::now(),
        }
    }

    /// Timed messages handled so far.
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::Relaxed)
    }

    /// Answers a probe: the meter, and the mailbox as the probe found it.
    pub fn answer(&self, probe: &MailboxProbe) -> MeterSnapshot {
        MeterSnapshot {
            depth: self
                .handled()
                .saturating_sub(probe.handled_at_send.unwrap_or(u64::MAX)),
            wait_seconds: probe.sent_at.elapsed().as_secs_f64(),
            handled: self.handled(),
            by_message: self
                .by_message
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            metrics: Vec::new(),
        }
    }
}

/// Sent through an actor's mailbox to see how it is doing. `handled_at_send` is the meter's
/// count when the probe was sent, if the sender knows it (from the previous answer's
/// `handled`, or a first probe); without it the depth reads 0.
#[derive(Debug, Clone, Message)]
#[rtype(result = "MeterSnapshot")]
pub struct MailboxProbe {
    pub sent_at: Instant,
    pub handled_at_send: Option<u64>,
}

/// The actor's meter itself: the front reads its handled count when it sends a probe (a
/// counter the actor publishes; nothing decides on it).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Arc<Meter>")]
pub struct GetMeter;

/// An actor's answer to a [`MailboxProbe`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeterSnapshot {
    /// Timed messages handled while the probe waited: those queued ahead of it.
    pub depth: u64,
    /// How long the probe waited in the mailbox.
    pub wait_seconds: f64,
    /// Timed messages handled so far.
    pub handled: u64,
    pub by_message: BTreeMap<&'static str, HandleStats>,
    /// The actor's own quantities under etcd's metric names (its counters are plain fields
    /// it reads while answering the probe, so the hot path pays no atomics or locks).
    pub metrics: Vec<Sample>,
}

/// One series an actor reports for `/metrics`: an etcd metric name, its labels, its value.
/// The front knows each name's type and help text and renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: SampleValue,
}

impl Sample {
    /// A series without labels.
    pub fn value(name: &'static str, v: f64) -> Self {
        Self {
            name,
            labels: Vec::new(),
            value: SampleValue::Value(v),
        }
    }

    pub fn histogram(name: &'static str, h: &Histogram) -> Self {
        Self {
            name,
            labels: Vec::new(),
            value: SampleValue::Histogram(h.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SampleValue {
    Value(f64),
    Histogram(Histogram),
}

/// A Prometheus histogram: `counts[i]` observations in `(bounds[i-1], bounds[i]]` and the last
/// one above every bound (not cumulative; the renderer sums them).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    pub bounds: &'static [f64],
    pub counts: Vec<u64>,
    pub count: u64,
    pub sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            count: 0,
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.count += 1;
        self.sum += v;
    }
}

/// `start * factor^i` for `i` in `0..N`: the Go client's `ExponentialBuckets`, which etcd's
/// histograms use.
pub const fn exponential_buckets<const N: usize>(start: f64, factor: f64) -> [f64; N] {
    let mut out = [0.0; N];
    let mut v = start;
    let mut i = 0;
    while i < N {
        out[i] = v;
        v *= factor;
        i += 1;
    }
    out
}

/// `etcd_server_apply_duration_seconds`'s buckets: 100 µs doubling up to 52 s.
pub const APPLY_BUCKETS: [f64; 20] = exponential_buckets(0.0001, 2.0);

/// etcd's `etcd_server_apply_duration_seconds{op,success,version}` as one applying actor keeps
/// it: how long applying each committed request took, by etcd's op name (`Put`, `Txn`,
/// `LeaseGrant`, v2's `PUT`, ...) and whether it succeeded.
#[derive(Debug, Clone, Default)]
pub struct ApplyDurations {
    by_op: BTreeMap<(&'static str, &'static str, bool), Histogram>,
}

impl ApplyDurations {
    /// One request of API `version` (`"v2"` or `"v3"`) applied in `seconds`.
    pub fn observe(
        &mut self,
        version: &'static str,
        op: &'static str,
        success: bool,
        seconds: f64,
    ) {
        self.by_op
            .entry((op, version, success))
            .or_insert_with(|| Histogram::new(&APPLY_BUCKETS))
            .observe(seconds);
    }

    /// One sample per (op, success, version) seen, labelled in etcd's order.
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        self.by_op.iter().map(|((op, version, success), h)| {
            let mut s = Sample::histogram("etcd_server_apply_duration_seconds", h);
            s.labels = vec![
                ("op", (*op).to_owned()),
                ("success", success.to_string()),
                ("version", (*version).to_owned()),
            ];
            s
        })
    }
}

/// Implements [`MailboxProbe`] and [`GetMeter`] for an actor whose meter is the field
/// `$field`: `impl_mailbox_probe!(MvccActor, meter)`, or for a generic actor
/// `impl_mailbox_probe!([C: Clock] LessorActor<C>, meter)`.
#[macro_export]
macro_rules! impl_mailbox_probe {
    // The actor also reports its quantities: `fn $metrics(&self) -> Vec<Sample>`.
    ([$($generics:tt)*] $actor:ty, $field:ident, $metrics:ident) => {
        impl<$($generics)*> ::actix::Handler<$crate::meter::MailboxProbe> for $actor {
            type Result = ::actix::MessageResult<$crate::meter::MailboxProbe>;

            fn handle(
                &mut self,
                probe: $crate::meter::MailboxProbe,
                _: &mut Self::Context,
            ) -> Self::Result {
                let mut snapshot = self.$field.answer(&probe);
                snapshot.metrics = self.$metrics();
                ::actix::MessageResult(snapshot)
            }
        }

        impl<$($generics)*> ::actix::Handler<$crate::meter::GetMeter> for $actor {
            type Result = ::actix::MessageResult<$crate::meter::GetMeter>;

            fn handle(
                &mut self,
                _: $crate::meter::GetMeter,
                _: &mut Self::Context,
            ) -> Self::Result {
                ::actix::MessageResult(self.$field.clone())
            }
        }
    };
    ([$($generics:tt)*] $actor:ty, $field:ident) => {
        impl<$($generics)*> ::actix::Handler<$crate::meter::MailboxProbe> for $actor {
            type Result = ::actix::MessageResult<$crate::meter::MailboxProbe>;

            fn handle(
                &mut self,
                probe: $crate::meter::MailboxProbe,
                _: &mut Self::Context,
            ) -> Self::Result {
                ::actix::MessageResult(self.$field.answer(&probe))
            }
        }

        impl<$($generics)*> ::actix::Handler<$crate::meter::GetMeter> for $actor {
            type Result = ::actix::MessageResult<$crate::meter::GetMeter>;

            fn handle(
                &mut self,
                _: $crate::meter::GetMeter,
                _: &mut Self::Context,
            ) -> Self::Result {
                ::actix::MessageResult(self.$field.clone())
            }
        }
    };
    ($actor:ty, $field:ident, $metrics:ident) => {
        $crate::impl_mailbox_probe!([] $actor, $field, $metrics);
    };
    ($actor:ty, $field:ident) => {
        $crate::impl_mailbox_probe!([] $actor, $field);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_record_per_message_and_probes_read_depth() {
        let m = Meter::new();
        let probe = MailboxProbe {
            sent_at: Instant::now(),
            handled_at_send: Some(m.handled()),
        };
        for _ in 0..3 {
            let _t = m.start("Put");
        }
        {
            let _t = m.start("Range");
        }
        let snap = m.answer(&probe);
        assert_eq!(snap.depth, 4, "four handled while the probe waited");
        assert_eq!(snap.handled, 4);
        assert_eq!(snap.by_message["Put"].count, 3);
        assert_eq!(snap.by_message["Range"].count, 1);
        let put = &snap.by_message["Put"];
        assert_eq!(put.buckets.iter().sum::<u64>(), 3);
        // Without a count at sending, the depth is unknown: 0.
        let blind = MailboxProbe {
            sent_at: Instant::now(),
            handled_at_send: None,
        };
        assert_eq!(m.answer(&blind).depth, 0);
    }

    #[test]
    fn buckets_split_at_their_bounds() {
        let mut h = HandleStats::default();
        h.observe(0.000_01);
        h.observe(0.002);
        h.observe(5.0);
        assert_eq!(h.buckets[0], 1);
        assert_eq!(h.buckets[5], 1);
        assert_eq!(h.buckets[HANDLE_BUCKETS.len()], 1);
        assert_eq!(h.count, 3);
    }

    /// A real mailbox: messages queued ahead of the probe are its depth.
    #[test]
    fn a_probe_behind_queued_messages_reads_their_number() {
        use actix::prelude::*;

        struct Busy {
            meter: Arc<Meter>,
        }
        impl Actor for Busy {
            type Context = Context<Self>;
        }
        #[derive(Message)]
        #[rtype(result = "()")]
        struct Work;
        impl Handler<Work> for Busy {
            type Result = ();
            fn handle(&mut self, _: Work, _: &mut Self::Context) {
                let _t = self.meter.start("Work");
            }
        }
        crate::impl_mailbox_probe!(Busy, meter);

        let sys = System::new();
        let snap = sys.block_on(async {
            let addr = Busy {
                meter: Meter::new(),
            }
            .start();
            let meter = addr.send(GetMeter).await.unwrap();
            // Nothing runs the actor until this task awaits: all seven wait in the mailbox.
            for _ in 0..7 {
                addr.do_send(Work);
            }
            let probe = MailboxProbe {
                sent_at: Instant::now(),
                handled_at_send: Some(meter.handled()),
            };
            addr.send(probe).await.unwrap()
        });
        assert_eq!(snap.depth, 7);
        assert_eq!(snap.by_message["Work"].count, 7);
    }
}
