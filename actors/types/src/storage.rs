//! The storage-engine traits the state machine writes through.
//!
//! An engine is a set of named tables ("buckets" in etcd) of byte keys to byte values with
//! serializable read transactions that run concurrently and one write transaction at a time whose
//! reads see its own writes. `actcd-backend` implements it over LMDB; [`MemEngine`] implements it
//! in memory for unit tests and benches. The MVCC store only knows these traits.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

/// The backend's named databases (DESIGN.md, "Storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Key,
    Meta,
    Lease,
    Auth,
    AuthUsers,
    AuthRoles,
    Members,
    MembersRemoved,
    Alarm,
}

impl Table {
    pub const ALL: [Table; 9] = [
        Table::Key,
        Table::Meta,
        Table::Lease,
        Table::Auth,
        Table::AuthUsers,
        Table::AuthRoles,
        Table::Members,
        Table::MembersRemoved,
        Table::Alarm,
    ];

    /// The database name on disk, etcd's bucket name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Key => "key",
            Table::Meta => "meta",
            Table::Lease => "lease",
            Table::Auth => "auth",
            Table::AuthUsers => "authUsers",
            Table::AuthRoles => "authRoles",
            Table::Members => "members",
            Table::MembersRemoved => "members_removed",
            Table::Alarm => "alarm",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backend: {0}")]
pub struct StorageError(pub String);

pub type StorageResult<T> = Result<T, StorageError>;

/// Visitor for scans: return `false` to stop.
pub type ScanFn<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

pub trait ReadTxn {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>>;
    /// Visits `[from, to)` in key order (`to = None`: to the end).
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()>;
}

/// A [`try_scan`] callback.
pub type TryScanFn<'a, E> = dyn FnMut(&[u8], &[u8]) -> Result<(), E> + 'a;

/// [`ReadTxn::scan`] over a whole table with a callback that may fail: the first error stops
/// the scan and is returned.
pub fn try_scan<E: From<StorageError>>(
    txn: &(impl ReadTxn + ?Sized),
    table: Table,
    f: &mut TryScanFn<'_, E>,
) -> Result<(), E> {
    let mut failed = None;
    txn.scan(table, &[], None, &mut |k, v| match f(k, v) {
        Ok(()) => true,
        Err(e) => {
            failed = Some(e);
            false
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

pub trait WriteTxn: ReadTxn {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()>;
    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()>;
    /// Makes every write of this transaction visible and durable at once (atomic on crash).
    fn commit(self: Box<Self>) -> StorageResult<()>;
}

/// A storage engine shared by the threads that read it: LMDB's environment is designed for
/// concurrent readers and one writer, so the handle is shared, not a lock around a struct.
pub trait KvEngine: Send + Sync + 'static {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>>;
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>>;
    /// A write transaction that keeps the engine alive itself, so it can stay open across
    /// messages (the MVCC store batches several applies into one commit). Same rules as
    /// [`Self::write`]: one at a time, begun and ended on one thread.
    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>>;
    /// A read transaction that keeps the engine alive itself and may move to another thread:
    /// for a long read off the writer's thread (streaming a snapshot to a client). It pins
    /// its snapshot's pages until dropped.
    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>>;
    /// Flushes committed transactions to stable storage.
    fn sync(&self) -> StorageResult<()>;
    /// Bytes the engine occupies on disk and bytes in use by live pages.
    fn size(&self) -> StorageResult<(u64, u64)>;
    /// Gives the space of freed pages back: afterwards the on-disk size is about the size in
    /// use. Returns the on-disk size before and after. The caller holds no transaction. An
    /// engine with nothing to give back (in memory) just reports its size twice.
    fn defragment(&self) -> StorageResult<(u64, u64)> {
        let (size, _) = self.size()?;
        Ok((size, size))
    }
}

type Tables = BTreeMap<Table, BTreeMap<Vec<u8>, Vec<u8>>>;

/// An in-memory engine for tests and benches: a map per table, copy-on-commit writes.
#[derive(Debug, Clone, Default)]
pub struct MemEngine {
    tables: Arc<Mutex<Tables>>,
}

impl MemEngine {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        // A poisoned lock means a test already panicked; its data is still the last commit.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn scan_map(
    map: Option<&BTreeMap<Vec<u8>, Vec<u8>>>,
    from: &[u8],
    to: Option<&[u8]>,
    f: &mut ScanFn<'_>,
) {
    let Some(map) = map else { return };
    let upper = match to {
        Some(t) => Bound::Excluded(t.to_vec()),
        None => Bound::Unbounded,
    };
    if to.is_some_and(|t| t <= from) {
        return;
    }
    for (k, v) in map.range((Bound::Included(from.to_vec()), upper)) {
        if !f(k, v) {
            break;
        }
    }
}

struct MemRead {
    snapshot: Tables,
}

impl ReadTxn for MemRead {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.snapshot.get(&table).and_then(|m| m.get(key)).cloned())
    }
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        scan_map(self.snapshot.get(&table), from, to, f);
        Ok(())
    }
}

struct MemWrite {
    engine: MemEngine,
    working: Tables,
}

impl ReadTxn for MemWrite {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(self.working.get(&table).and_then(|m| m.get(key)).cloned())
    }
    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        scan_map(self.working.get(&table), from, to, f);
        Ok(())
    }
}

impl WriteTxn for MemWrite {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        self.working
            .entry(table)
            .or_default()
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        if let Some(m) = self.working.get_mut(&table) {
            m.remove(key);
        }
        Ok(())
    }
    fn commit(self: Box<Self>) -> StorageResult<()> {
        *self.engine.lock() = self.working;
        Ok(())
    }
}

impl KvEngine for MemEngine {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(MemRead {
            snapshot: self.lock().clone(),
        }))
    }
    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Ok(Box::new(MemRead {
            snapshot: self.lock().clone(),
        }))
    }
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>> {
        Ok(Box::new(MemWrite {
            engine: self.clone(),
            working: self.lock().clone(),
        }))
    }
    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>> {
        let working = self.lock().clone();
        Ok(Box::new(MemWrite {
            engine: (*self).clone(),
            working,
        }))
    }
    fn sync(&self) -> StorageResult<()> {
        Ok(())
    }
    fn size(&self) -> StorageResult<(u64, u64)> {
        let bytes: usize = self
            .lock()
            .values()
            .flat_map(|m| m.iter())
            .map(|(k, v)| k.len() + v.len())
            .sum();
        Ok((bytes as u64, bytes as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_engine_reads_its_own_writes_and_commits_atomically() {
        let e = MemEngine::new();
        let mut w = e.write().unwrap();
        w.put(Table::Key, b"a", b"1").unwrap();
        w.put(Table::Key, b"b", b"2").unwrap();
        assert_eq!(w.get(Table::Key, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(e.read().unwrap().get(Table::Key, b"a").unwrap(), None);
        w.commit().unwrap();
        let r = e.read().unwrap();
        let mut seen = vec![];
        r.scan(Table::Key, b"a", Some(b"b"), &mut |k, _| {
            seen.push(k.to_vec());
            true
        })
        .unwrap();
        assert_eq!(seen, vec![b"a".to_vec()]);
    }
}
