//! raft-rs logs through `slog`; this drain hands its records to `tracing` under the target
//! `raft`, so elections and term changes show in actcd's log like etcd's `raft.node` lines.

use std::fmt::{self, Write as _};

/// A `slog` drain that re-emits every record as a `tracing` event.
pub(crate) struct ToTracing;

/// Collects a record's key-value pairs as ` key=value`.
struct Pairs(String);

impl slog::Serializer for Pairs {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        // Writing to a String cannot fail.
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

fn pairs(record: &slog::Record<'_>, values: &slog::OwnedKVList) -> String {
    use slog::KV as _;
    let mut p = Pairs(String::new());
    // Serializing into a String has no failure to report.
    let _ = record.kv().serialize(record, &mut p);
    let _ = values.serialize(record, &mut p);
    p.0
}

impl slog::Drain for ToTracing {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        macro_rules! emit {
            ($level:expr) => {
                if tracing::enabled!(target: "raft", $level) {
                    tracing::event!(target: "raft", $level, "{}{}", record.msg(), pairs(record, values));
                }
            };
        }
        match record.level() {
            slog::Level::Critical | slog::Level::Error => emit!(tracing::Level::ERROR),
            slog::Level::Warning => emit!(tracing::Level::WARN),
            slog::Level::Info => emit!(tracing::Level::INFO),
            slog::Level::Debug => emit!(tracing::Level::DEBUG),
            slog::Level::Trace => emit!(tracing::Level::TRACE),
        }
        Ok(())
    }
}
