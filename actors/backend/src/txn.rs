//! Read and write transactions behind the engine traits.

use std::ops::Bound;
use std::sync::Arc;

use actcd_types::storage::{ReadTxn, ScanFn, StorageResult, Table, WriteTxn};
use heed::{RoTxn, RwTxn, WithoutTls};

use crate::engine::{Db, Generation, LmdbEngine};
use crate::error::BackendError;

/// A read transaction: a consistent snapshot of the last commit before it began. It holds a
/// reader slot and keeps the pages of its snapshot from being reused, so drop it promptly. It
/// holds the environment generation it began in (a defragmentation waits for it).
pub(crate) struct LmdbRead<'e> {
    engine: &'e LmdbEngine,
    // heed's owned read transaction keeps its own handle on the environment.
    txn: RoTxn<'static, WithoutTls>,
    generation: Arc<Generation>,
    /// For a transaction that outlives its caller's borrow ([`LmdbRead::owned`]).
    _owner: Option<Arc<LmdbEngine>>,
}

impl<'e> LmdbRead<'e> {
    pub(crate) fn new(engine: &'e LmdbEngine) -> Result<Self, BackendError> {
        let generation = engine.generation()?;
        let txn = generation
            .env
            .clone()
            .static_read_txn()
            .map_err(|e| engine.lmdb(e))?;
        engine.count_read(1);
        Ok(Self {
            engine,
            txn,
            generation,
            _owner: None,
        })
    }
}

impl Drop for LmdbRead<'_> {
    fn drop(&mut self) {
        self.engine.count_read(-1);
    }
}

impl LmdbRead<'static> {
    /// A read transaction holding its own handle on the engine; it may move between threads
    /// (the environment runs without thread-local reader slots).
    #[allow(unsafe_code)]
    pub(crate) fn owned(engine: Arc<LmdbEngine>) -> Result<Self, BackendError> {
        // SAFETY: `shared` points into the `Arc`'s allocation, which never moves and which the
        // transaction keeps (`_owner`, dropped last) for as long as it lives.
        let shared: &'static LmdbEngine = unsafe { &*Arc::as_ptr(&engine) };
        let mut read = Self::new(shared)?;
        read._owner = Some(engine);
        Ok(read)
    }
}

impl ReadTxn for LmdbRead<'_> {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(get(self.engine, self.generation.db(table), &self.txn, key)?)
    }

    /// The value as a slice of the map, valid while the transaction is.
    fn get_with(
        &self,
        table: Table,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>),
    ) -> StorageResult<()> {
        f(get_borrowed(
            self.engine,
            self.generation.db(table),
            &self.txn,
            key,
        )?);
        Ok(())
    }

    /// LMDB: data a read-only transaction returns stays valid, and the pages it lies on are
    /// not reused, until the transaction ends; the environment (and its map) lives as long as
    /// the transaction's generation handle.
    fn lends_for_its_life(&self) -> bool {
        true
    }

    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        let db = self.generation.db(table);
        Ok(scan(self.engine, db, &self.txn, from, to, f)?)
    }
}

/// The write transaction. Its reads see its own writes; dropping it without `commit` aborts it.
/// It must end on the thread that opened it: LMDB's writer lock is a mutex held by that thread
/// (the boxed trait object is not `Send`, which keeps it there).
pub(crate) struct LmdbWrite<'e> {
    engine: &'e LmdbEngine,
    // Declared before `generation` and `_owner`: fields drop in order, so the transaction ends
    // before the environment it borrows from can go.
    txn: RwTxn<'static>,
    generation: Arc<Generation>,
    /// For a transaction that outlives its caller's borrow ([`LmdbWrite::owned`]): the handle
    /// that keeps the engine `engine` points into alive.
    _owner: Option<Arc<LmdbEngine>>,
}

impl<'e> LmdbWrite<'e> {
    pub(crate) fn new(
        engine: &'e LmdbEngine,
        owner: Option<Arc<LmdbEngine>>,
    ) -> Result<Self, BackendError> {
        Self::in_generation(engine, engine.generation()?, owner)
    }

    /// A write transaction in `generation`, which need not be the one in use (a
    /// defragmentation's copy, before it is swapped in).
    #[allow(unsafe_code)]
    pub(crate) fn in_generation(
        engine: &'e LmdbEngine,
        generation: Arc<Generation>,
        owner: Option<Arc<LmdbEngine>>,
    ) -> Result<Self, BackendError> {
        // SAFETY: `env` points into the `Arc`'s heap allocation, which never moves. The
        // transaction holds that `Arc` (`generation`) for as long as it borrows from it: the
        // transaction field drops first (field order), and `commit` consumes it before the
        // handle goes. So the `'static` borrow never dangles.
        let env: &'static heed::Env<WithoutTls> = unsafe { &(*Arc::as_ptr(&generation)).env };
        let txn = env.write_txn().map_err(|e| engine.lmdb(e))?;
        Ok(Self {
            engine,
            txn,
            generation,
            _owner: owner,
        })
    }
}

impl LmdbWrite<'static> {
    /// A write transaction that holds its own handle on the engine, so the MVCC store can keep
    /// it open across applies and commit several batches at once.
    #[allow(unsafe_code)]
    pub(crate) fn owned(engine: Arc<LmdbEngine>) -> Result<Self, BackendError> {
        // SAFETY: as in `new`: `shared` points into the `Arc`'s allocation, and the transaction
        // keeps that `Arc` (`_owner`) until after its own fields are gone.
        let shared: &'static LmdbEngine = unsafe { &*Arc::as_ptr(&engine) };
        Self::new(shared, Some(engine))
    }
}

impl ReadTxn for LmdbWrite<'_> {
    fn get(&self, table: Table, key: &[u8]) -> StorageResult<Option<Vec<u8>>> {
        Ok(get(self.engine, self.generation.db(table), &self.txn, key)?)
    }

    /// The value as a slice of the map, valid while the transaction is.
    fn get_with(
        &self,
        table: Table,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>),
    ) -> StorageResult<()> {
        f(get_borrowed(
            self.engine,
            self.generation.db(table),
            &self.txn,
            key,
        )?);
        Ok(())
    }

    fn scan(
        &self,
        table: Table,
        from: &[u8],
        to: Option<&[u8]>,
        f: &mut ScanFn<'_>,
    ) -> StorageResult<()> {
        let db = self.generation.db(table);
        Ok(scan(self.engine, db, &self.txn, from, to, f)?)
    }
}

impl WriteTxn for LmdbWrite<'_> {
    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> StorageResult<()> {
        if !self.engine.key_fits(key) {
            let max = self.engine.max_key_size();
            return Err(BackendError::KeySize {
                len: key.len(),
                max,
            }
            .into());
        }
        let db = self.generation.db(table);
        Ok(db
            .put(&mut self.txn, key, value)
            .map_err(|e| self.engine.lmdb(e))?)
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> StorageResult<()> {
        // Deleting an absent key is not an error, as in a map; an unstorable key is absent.
        if !self.engine.key_fits(key) {
            return Ok(());
        }
        let db = self.generation.db(table);
        db.delete(&mut self.txn, key)
            .map_err(|e| self.engine.lmdb(e))?;
        Ok(())
    }

    /// Empties the database in place (`mdb_drop` without deleting it): its pages go to the
    /// free list in one call, however many records it held.
    fn clear(&mut self, table: Table) -> StorageResult<()> {
        let db = self.generation.db(table);
        db.clear(&mut self.txn).map_err(|e| self.engine.lmdb(e))?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> StorageResult<()> {
        let Self {
            engine,
            txn,
            generation,
            _owner,
        } = *self;
        let done = txn.commit().map_err(|e| engine.lmdb(e));
        drop(generation);
        drop(_owner);
        Ok(done?)
    }
}

fn get(
    engine: &LmdbEngine,
    db: Db,
    txn: &RoTxn,
    key: &[u8],
) -> Result<Option<Vec<u8>>, BackendError> {
    Ok(get_borrowed(engine, db, txn, key)?.map(<[u8]>::to_vec))
}

fn get_borrowed<'t>(
    engine: &LmdbEngine,
    db: Db,
    txn: &'t RoTxn,
    key: &[u8],
) -> Result<Option<&'t [u8]>, BackendError> {
    if !engine.key_fits(key) {
        return Ok(None);
    }
    db.get(txn, key).map_err(|e| engine.lmdb(e))
}

fn scan(
    engine: &LmdbEngine,
    db: Db,
    txn: &RoTxn,
    from: &[u8],
    to: Option<&[u8]>,
    f: &mut ScanFn<'_>,
) -> Result<(), BackendError> {
    if to.is_some_and(|to| to <= from) {
        return Ok(());
    }
    // LMDB cannot position a cursor on a key it cannot store. An empty `from` is the start of
    // the table. A `from` past the key size limit starts at its longest storable prefix: the
    // only stored key sorting between that prefix and `from` is the prefix itself, skipped
    // below. `to` is compared by heed in Rust and has no limit.
    let max = engine.max_key_size();
    let start = match from.len() {
        0 => Bound::Unbounded,
        n if n > max => Bound::Included(&from[..max]),
        _ => Bound::Included(from),
    };
    let bounds = (start, to.map_or(Bound::Unbounded, Bound::Excluded));
    let lmdb = |e| engine.lmdb(e);
    for entry in db.range(txn, &bounds).map_err(lmdb)? {
        let (key, value) = entry.map_err(lmdb)?;
        if key < from {
            continue;
        }
        if !f(key, value) {
            break;
        }
    }
    Ok(())
}
