//! Where a damaged `key` record is reported: the log, naming its key and revision, and the
//! CORRUPT alarm for this member, raised through whoever proposes it
//! ([`actcd_types::msg::RaiseCorrupt`], the corruption checker in the daemon).
//!
//! A record fails its check (`actcd_types::key_record`) wherever it is read: a Range or txn on a
//! read view, the writer's own reads (prev_kv, compares), a watcher's history, HashKV, the
//! index rebuild at start-up, compaction, a snapshot, the scrub. The request that met it fails
//! with etcd's `etcdserver: corrupt cluster` ([`crate::Error::Damaged`] →
//! `EtcdError::Corrupt`) and is never answered with the record's bytes; this reporter is what
//! each of those places calls. It is cheap to clone (the store hands one to every read view).

use actcd_types::key_record::DamagedRecord;
use actcd_types::msg::RaiseCorrupt;
use actix::Recipient;

/// Logs damaged records and asks for the CORRUPT alarm. Without a recipient (tests, benches,
/// start-up before the actors run) it only logs.
#[derive(Clone, Default)]
pub struct DamageReport {
    alarm: Option<Recipient<RaiseCorrupt>>,
    member_id: u64,
}

impl std::fmt::Debug for DamageReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DamageReport")
            .field("alarm", &self.alarm.is_some())
            .field("member_id", &self.member_id)
            .finish()
    }
}

impl DamageReport {
    /// Raises CORRUPT for `member_id` through `alarm`.
    pub fn to(alarm: Recipient<RaiseCorrupt>, member_id: u64) -> Self {
        Self {
            alarm: Some(alarm),
            member_id,
        }
    }

    /// Whether an alarm recipient is wired.
    pub fn raises_alarms(&self) -> bool {
        self.alarm.is_some()
    }

    /// `record` failed its check while `during` read it: log it, raise CORRUPT. `try_send`:
    /// a full mailbox drops the request, and the next read of the record asks again.
    pub fn report(&self, record: &DamagedRecord, during: &str) {
        tracing::error!(
            revision = %record.revision_text(),
            key = %record.key_text(),
            reason = %record.reason,
            during,
            "damaged record in the key table; refusing to serve it"
        );
        self.raise(record);
    }

    /// Raises CORRUPT for `record` without logging it again.
    pub fn raise(&self, record: &DamagedRecord) {
        if let Some(alarm) = &self.alarm {
            let _ = alarm.try_send(RaiseCorrupt {
                member_id: self.member_id,
                reason: record.to_string(),
            });
        }
    }
}

#[cfg(test)]
#[path = "damage_tests.rs"]
mod tests;
