//! `BackendActor`: the backend's blocking maintenance work (sync, size, copies) on a
//! `SyncArbiter` thread, so fsyncs and multi-megabyte copies never stall an async Arbiter.
//! Reads and write transactions don't go through it: they use the shared [`LmdbEngine`] directly.

use std::path::PathBuf;
use std::sync::Arc;

use actix::{Actor, Handler, Message, SyncContext};

use crate::engine::LmdbEngine;

/// Flush every committed transaction to stable storage. The daemon sends it every 100 ms and
/// before WAL segments are released (the released entries must not be needed to rebuild it).
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(), String>")]
pub struct SyncBackend;

/// `(bytes the data file occupies, bytes in pages holding live data)`: etcd's `dbSize` and
/// `dbSizeInUse`, for Status, the quota check and the metrics.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "Result<(u64, u64), String>")]
pub struct DbSize;

/// Write a compacted copy of the last committed state to `path` (into `path/data.mdb` if it is a
/// directory), atomically: for snapshots sent to followers and for defragmentation.
#[derive(Debug, Clone, Message)]
#[rtype(result = "Result<(), String>")]
pub struct CopyTo {
    pub path: PathBuf,
}

/// Runs in a `SyncArbiter`: `SyncArbiter::start(1, move || BackendActor::new(engine.clone()))`.
pub struct BackendActor {
    /// Mailbox and handler timings, for `/metrics` (`MailboxProbe`).
    meter: std::sync::Arc<actcd_types::meter::Meter>,
    engine: Arc<LmdbEngine>,
}

impl BackendActor {
    pub fn new(engine: Arc<LmdbEngine>) -> Self {
        Self {
            meter: actcd_types::meter::Meter::new(),
            engine,
        }
    }
}

impl Actor for BackendActor {
    type Context = SyncContext<Self>;
}

impl Handler<SyncBackend> for BackendActor {
    type Result = Result<(), String>;

    /// `fdatasync`s the data file. An error here means committed state may not be durable:
    /// the caller must not release WAL segments.
    fn handle(&mut self, _: SyncBackend, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("SyncBackend");
        self.engine.force_sync().map_err(|e| {
            tracing::error!(error = %e, "backend sync failed");
            e.to_string()
        })
    }
}

impl Handler<DbSize> for BackendActor {
    type Result = Result<(u64, u64), String>;

    /// Reads the file size and page counts in a short read transaction.
    fn handle(&mut self, _: DbSize, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("DbSize");
        self.engine.disk_size().map_err(|e| e.to_string())
    }
}

impl Handler<CopyTo> for BackendActor {
    type Result = Result<(), String>;

    /// Copies inside one read transaction: writers go on, and the copy is the state of the
    /// last commit when it began (its consistent index says which entries it covers).
    fn handle(&mut self, msg: CopyTo, _: &mut Self::Context) -> Self::Result {
        let _timer = self.meter.start("CopyTo");
        match self.engine.copy_to(&msg.path) {
            Ok(file) => {
                tracing::info!(path = %file.display(), "backend copied");
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "backend copy failed");
                Err(e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use actcd_types::storage::{KvEngine, Table};
    use actix::SyncArbiter;

    use super::*;
    use crate::engine::{BackendOptions, DATA_FILE};

    fn small() -> BackendOptions {
        BackendOptions {
            map_size: 64 << 20,
            ..BackendOptions::default()
        }
    }

    #[test]
    fn messages_sync_report_size_and_copy() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(LmdbEngine::open(&dir.path().join("snap"), small()).unwrap());
        let mut w = engine.write().unwrap();
        w.put(Table::Meta, b"consistent_index", &7u64.to_be_bytes())
            .unwrap();
        w.commit().unwrap();

        let copy_dir = dir.path().join("copy");
        std::fs::create_dir(&copy_dir).unwrap();
        let copy_file = dir.path().join("snapshot.db");

        let sys = actix::System::new();
        let (synced, size, into_dir, into_file) = sys.block_on({
            let engine = engine.clone();
            let copy_dir = copy_dir.clone();
            let copy_file = copy_file.clone();
            async move {
                let addr = SyncArbiter::start(1, move || BackendActor::new(engine.clone()));
                (
                    addr.send(SyncBackend).await.unwrap(),
                    addr.send(DbSize).await.unwrap(),
                    addr.send(CopyTo { path: copy_dir }).await.unwrap(),
                    addr.send(CopyTo { path: copy_file }).await.unwrap(),
                )
            }
        });
        assert_eq!(synced, Ok(()));
        let (on_disk, in_use) = size.unwrap();
        assert!(
            in_use > 0 && on_disk >= in_use,
            "on_disk {on_disk}, in_use {in_use}"
        );
        assert_eq!(into_dir, Ok(()));
        assert_eq!(into_file, Ok(()));
        assert!(copy_file.is_file());
        assert!(!dir.path().join("snapshot.db.tmp").exists());

        // The copy made into a directory is an environment with the same data.
        let copy = LmdbEngine::open(&copy_dir, small()).unwrap();
        assert!(copy_dir.join(DATA_FILE).is_file());
        let r = copy.read().unwrap();
        assert_eq!(
            r.get(Table::Meta, b"consistent_index").unwrap(),
            Some(7u64.to_be_bytes().to_vec())
        );
    }

    #[test]
    fn a_failed_copy_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(LmdbEngine::open(dir.path(), small()).unwrap());
        let missing = dir.path().join("no/such/dir/snapshot.db");
        let sys = actix::System::new();
        let got = sys.block_on(async move {
            let addr = SyncArbiter::start(1, move || BackendActor::new(engine.clone()));
            addr.send(CopyTo { path: missing }).await.unwrap()
        });
        let err = got.unwrap_err();
        assert!(
            err.starts_with("backend: cannot copy the environment to "),
            "{err}"
        );
    }
}

actcd_types::impl_mailbox_probe!(BackendActor, meter);
