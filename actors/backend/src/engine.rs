//! The LMDB environment: opening it, its named databases, sync, size, and copies.

use std::ffi::OsString;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};

use actcd_types::storage::{KvEngine, ReadEngine, ReadTxn, StorageResult, Table, WriteTxn};
use heed::types::Bytes;
use heed::{
    CommitOrAbort, CommitToken, CompactionOption, Database, Env, EnvFlags, EnvOpenOptions,
    OnCommit, WithoutTls,
};

use crate::error::BackendError;
use crate::txn::{LmdbRead, LmdbWrite};

/// One of the environment's named databases, keys and values as raw bytes.
pub(crate) type Db = Database<'static, Bytes, Bytes>;

/// Named databases the environment may hold: the nine tables with room to add more without
/// reopening old data directories with a new limit.
const MAX_DBS: u32 = 16;

/// The data file LMDB keeps inside the environment directory; also the name [`LmdbEngine::copy_to`]
/// gives a copy made into a directory, so that directory opens as an environment.
pub const DATA_FILE: &str = "data.mdb";

/// Map sizes are rounded up to this, a multiple of every page size LMDB runs with.
const MAP_SIZE_ALIGN: usize = 64 * 1024;

/// When a committed write transaction reaches stable storage (see the crate doc, "Durability").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// LMDB's `MDB_NOSYNC`: a commit writes its pages into the page cache and returns; only
    /// [`LmdbEngine::force_sync`] flushes. Survives a process crash; a power loss between syncs
    /// loses the unsynced commits and, on a file system that reorders writes, can leave the
    /// environment inconsistent.
    NoSync,
    /// LMDB's `MDB_NOMETASYNC`: one `fdatasync` of the data pages per commit, the meta page
    /// flushed by the next commit or sync. A power loss can undo the last commit, never corrupt.
    /// The default: the WAL replays an undone commit, and nothing can replay a corrupt file.
    #[default]
    NoMetaSync,
    /// LMDB's default: data and meta page synced on every commit.
    EveryCommit,
}

impl Durability {
    fn env_flags(self) -> EnvFlags {
        match self {
            Durability::NoSync => EnvFlags::NO_SYNC,
            Durability::NoMetaSync => EnvFlags::NO_META_SYNC,
            Durability::EveryCommit => EnvFlags::empty(),
        }
    }
}

/// How to open the environment. `Default` is what the daemon uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendOptions {
    /// Size of the memory map in bytes, the most the data file can grow to. Only address space
    /// is reserved, not memory or disk; keep it well above `--quota-backend-bytes`. Rounded up
    /// to a multiple of 64 KiB. An existing file larger than this keeps its size.
    pub map_size: usize,
    /// Reader slots: how many read transactions may be open at once (one slot per open read
    /// transaction, not per thread). Past it `read()` fails with `MDB_READERS_FULL`.
    pub max_readers: u32,
    pub durability: Durability,
}

impl BackendOptions {
    /// 8 GiB: etcd's suggested maximum `--quota-backend-bytes`.
    pub const DEFAULT_MAP_SIZE: usize = 8 * 1024 * 1024 * 1024;
    pub const DEFAULT_MAX_READERS: u32 = 1024;
}

impl Default for BackendOptions {
    fn default() -> Self {
        Self {
            map_size: Self::DEFAULT_MAP_SIZE,
            max_readers: Self::DEFAULT_MAX_READERS,
            durability: Durability::default(),
        }
    }
}

/// The backend: one LMDB environment and a handle on each table's named database. Shared by
/// reference (`Arc`) between the threads that read and the one that writes; see the crate doc.
///
/// The environment itself is a `Generation` that a defragmentation (`defrag.rs`) replaces with
/// a compacted one; every transaction holds the generation it began in, so transactions of the
/// old one read on after the swap and new ones begin in the new one.
pub struct LmdbEngine {
    /// The environment in use. `Option` for the trait's sake: it is always `Some` today.
    pub(crate) current: RwLock<Option<Arc<Generation>>>,
    /// Generations a defragmentation replaced whose transactions may still be open: closed
    /// by [`Self::reap_retired`] once nothing else holds them.
    pub(crate) retired: Mutex<Vec<crate::defrag::Retired>>,
    /// Threads closing retired generations ([`Self::reap_retired_in_background`]): the engine
    /// waits for them when it goes, so the directory can be opened again at once.
    pub(crate) closing: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Numbers the defragmentations' copy directories (`defrag-N`).
    pub(crate) defrag_seq: AtomicU64,
    pub(crate) dir: PathBuf,
    pub(crate) opts: BackendOptions,
    pub(crate) map_size: usize,
    max_key_size: usize,
    /// Read transactions open now (etcd's `etcd_mvcc_db_open_read_transactions`): readers on
    /// many threads open them, so a relaxed counter, touched once as one opens and once as it
    /// ends.
    open_reads: std::sync::atomic::AtomicI64,
}

/// An open environment and its databases.
pub(crate) struct Generation {
    pub(crate) env: Env<WithoutTls>,
    /// Indexed by [`table_index`].
    tables: Box<[Db]>,
    /// A defragmentation's copy directory this environment was opened in (its lock file
    /// stays there after the data file was renamed out): removed when the environment goes.
    lock_dir: Option<PathBuf>,
}

impl Drop for LmdbEngine {
    /// Waits for the threads still closing replaced environments: once the engine is gone, its
    /// directory can be opened again (LMDB refuses a second open while one lives).
    fn drop(&mut self) {
        let closing = std::mem::take(self.closing.get_mut().unwrap_or_else(|p| p.into_inner()));
        for t in closing {
            let _ = t.join();
        }
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        if let Some(dir) = &self.lock_dir
            && let Err(e) = fs::remove_dir_all(dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %dir.display(), error = %e, "cannot remove a defragmentation's directory");
        }
    }
}

impl Generation {
    pub(crate) fn db(&self, table: Table) -> Db {
        self.tables[table_index(table)]
    }
}

impl std::fmt::Debug for LmdbEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmdbEngine")
            .field("path", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The position of `table` in [`Table::ALL`], which lists the tables in declaration order.
pub(crate) fn table_index(table: Table) -> usize {
    table as usize
}

/// The databases created in the opening transaction, made usable past its commit.
struct Created<'e>(Vec<Database<'e, Bytes, Bytes>>);

impl OnCommit for Created<'_> {
    type Committed = Vec<Db>;

    fn on_commit(self, token: &CommitToken) -> Vec<Db> {
        self.0.into_iter().map(|db| db.on_commit(token)).collect()
    }
}

/// Where an older actcd's defragmentation wrote its copy, beside the data file. Found at open,
/// it is one that crashed before its swap: the data file is still whole, and the copy is
/// deleted (as are today's `defrag-N` directories, see `defrag.rs`).
const OLD_DEFRAG_FILE: &str = "data.mdb.defrag";

/// Opens the environment in `dir` and its databases, creating what is missing. `lock_dir`:
/// `dir` is a defragmentation's copy directory, removed when the environment goes.
pub(crate) fn open_generation(
    dir: &Path,
    opts: &BackendOptions,
    map_size: usize,
    lock_dir: Option<PathBuf>,
) -> Result<Generation, BackendError> {
    let env = open_env(dir, opts, map_size).map_err(|source| BackendError::Open {
        path: dir.to_owned(),
        source,
    })?;
    let lmdb = |e| BackendError::lmdb(e, map_size);
    let wtxn = env.write_txn().map_err(lmdb)?;
    let tables = env
        .create_databases_and_commit(wtxn, |opener, wtxn| -> heed::Result<_> {
            let mut dbs = Vec::with_capacity(Table::ALL.len());
            for table in Table::ALL {
                dbs.push(opener.create_database(wtxn, Some(table.name()))?);
            }
            Ok(CommitOrAbort::<_, ()>::Commit(Created(dbs)))
        })
        .map_err(lmdb)?
        .unwrap_commit()
        .into_boxed_slice();
    Ok(Generation {
        env,
        tables,
        lock_dir,
    })
}

pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

impl LmdbEngine {
    /// Opens (creating it and its databases if needed) the environment in `dir`.
    ///
    /// One environment per directory per process: opening a directory this process already has
    /// open fails (heed refuses it; two handles would break LMDB's locking).
    pub fn open(dir: &Path, opts: BackendOptions) -> Result<Self, BackendError> {
        // 0700 (etcd's `PrivateDirMode`); the member's start reports a wider data directory.
        actcd_types::private_fs::touch_private_dir(dir).map_err(|source| {
            BackendError::CreateDir {
                path: dir.to_owned(),
                source,
            }
        })?;
        // Leftovers of a defragmentation that crashed before its swap (a copy, whole or
        // partial), or after it (a directory holding only its lock file).
        for leftover in [OLD_DEFRAG_FILE, "data.mdb.defrag.tmp"] {
            let path = dir.join(leftover);
            if path.exists() {
                tracing::warn!(path = %path.display(), "removing an unfinished defragmentation's copy");
                let _ = fs::remove_file(&path);
            }
        }
        crate::defrag::remove_leftovers(dir);
        let map_size = opts.map_size.max(1).next_multiple_of(MAP_SIZE_ALIGN);
        let generation = open_generation(dir, &opts, map_size, None)?;
        tracing::info!(
            path = %generation.env.path().display(),
            map_size,
            durability = ?opts.durability,
            "backend opened"
        );
        let max_key_size = generation.env.max_key_size();
        Ok(Self {
            dir: generation.env.path().to_owned(),
            current: RwLock::new(Some(Arc::new(generation))),
            retired: Mutex::new(Vec::new()),
            closing: Mutex::new(Vec::new()),
            defrag_seq: AtomicU64::new(0),
            opts,
            map_size,
            max_key_size,
            open_reads: std::sync::atomic::AtomicI64::new(0),
        })
    }

    /// How many read transactions are open now.
    pub fn open_read_transactions(&self) -> i64 {
        self.open_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A read transaction opened (`1`) or ended (`-1`).
    pub(crate) fn count_read(&self, delta: i64) {
        self.open_reads
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }

    /// The environment in use; waits while a defragmentation swaps it.
    pub(crate) fn generation(&self) -> Result<Arc<Generation>, BackendError> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(BackendError::Closed)
    }

    /// Where the environment lives (canonicalized).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The map size in effect, after rounding.
    pub fn map_size(&self) -> usize {
        self.map_size
    }

    /// The longest key LMDB accepts (511 bytes by default); empty keys are rejected too.
    pub fn max_key_size(&self) -> usize {
        self.max_key_size
    }

    /// Whether LMDB can store `key`; a key it cannot store is absent from every table.
    pub(crate) fn key_fits(&self, key: &[u8]) -> bool {
        (1..=self.max_key_size).contains(&key.len())
    }

    /// Flushes every committed transaction (data and meta pages) to stable storage.
    pub fn force_sync(&self) -> Result<(), BackendError> {
        self.generation()?
            .env
            .force_sync()
            .map_err(|e| self.lmdb(e))?;
        #[cfg(feature = "failpoints")]
        if let Some(t) = self.last_txn_id() {
            actcd_types::synclog::record(format_args!("lmdb {t}"));
        }
        Ok(())
    }

    /// Lets go of the data-file pages mapped into this process (`madvise(MADV_DONTNEED)` over
    /// the map). They stay in the kernel's page cache; the next read of one maps it again (a
    /// minor fault, no I/O while it stays cached). For after a scan that read the whole file
    /// once, as recovery does to rebuild the key index: those pages would otherwise count as
    /// this process's resident memory until the kernel evicts them (measured on a million
    /// keys: about 370 MiB of RssFile right after a restart).
    ///
    /// Nothing is lost: LMDB maps the file read-only and shared (no `WRITEMAP`), so a page
    /// dropped from the mapping is only forgotten by the page table, and readers running
    /// meanwhile fault it back in. Not on Linux: nothing to do.
    pub fn release_mapped_pages(&self) -> Result<(), BackendError> {
        // Held, so the map stays mapped while it is advised (a defragmentation swaps it).
        let _generation = self.generation()?;
        #[cfg(target_os = "linux")]
        {
            let io = |e: std::io::Error| BackendError::Lmdb(heed::Error::Io(e));
            // LMDB does not say where it mapped the file (`me_mapaddr` is only set for fixed
            // maps): the process's own map list does.
            let data = self.dir.join("data.mdb");
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(io)?;
            for (start, end) in mappings_of(&maps, &data) {
                // SAFETY: `start..end` is one of this process's mappings of the data file,
                // made by LMDB read-only and shared, and kept mapped by `_generation`. On such
                // a mapping MADV_DONTNEED drops page-table entries only: the contents stay the
                // file's, and no reference into the map can see a difference (a read faults
                // the page back in).
                #[allow(unsafe_code)]
                let rc = unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED)
                };
                if rc != 0 {
                    return Err(io(std::io::Error::last_os_error()));
                }
            }
        }
        Ok(())
    }

    /// The id of the last committed write transaction (LMDB's `me_last_txnid`).
    pub fn last_txn_id(&self) -> Option<u64> {
        Some(self.generation().ok()?.env.info().last_txn_id as u64)
    }

    /// The newest transaction whose meta page a commit has just made durable, by the
    /// durability mode: every commit's own ([`Durability::EveryCommit`]), the one before it
    /// ([`Durability::NoMetaSync`]: the commit's `fdatasync` flushed the previous meta page),
    /// or none ([`Durability::NoSync`]).
    #[cfg(feature = "failpoints")]
    pub(crate) fn durable_after_commit(&self) -> Option<u64> {
        let t = self.last_txn_id()?;
        match self.opts.durability {
            Durability::EveryCommit => Some(t),
            Durability::NoMetaSync => t.checked_sub(1),
            Durability::NoSync => None,
        }
    }

    /// `(bytes the data file occupies, bytes in pages that hold live data)`.
    ///
    /// The second counts the branch, leaf and overflow pages of every database plus the two
    /// meta pages; the gap between the two is free pages LMDB reuses before growing the file and
    /// that a compacting copy ([`Self::copy_to`]) drops (etcd's `dbSize` vs `dbSizeInUse`).
    pub fn disk_size(&self) -> Result<(u64, u64), BackendError> {
        let lmdb = |e| self.lmdb(e);
        let generation = self.generation()?;
        let env = &generation.env;
        let on_disk = env.real_disk_size().map_err(lmdb)?;
        let txn = env.read_txn().map_err(lmdb)?;
        let main = env.unnamed_database_stat();
        let mut in_use = main.non_free_page_size() as u64 + 2 * u64::from(main.page_size);
        for db in generation.tables.iter() {
            in_use += db.stat(&txn).map_err(lmdb)?.non_free_page_size() as u64;
        }
        Ok((on_disk, in_use))
    }

    /// Writes a compacted copy of the last committed state to `path`: into `path/data.mdb` if
    /// `path` is a directory (the directory then opens as an environment), else to the file
    /// `path`. The copy is written under a `.tmp` name, synced, and renamed, so a crash never
    /// leaves a partial copy under the final name. Runs in its own read transaction: writers
    /// go on meanwhile. Returns the file written.
    pub fn copy_to(&self, path: &Path) -> Result<PathBuf, BackendError> {
        let target = if path.is_dir() {
            path.join(DATA_FILE)
        } else {
            path.to_owned()
        };
        let mut tmp = OsString::from(target.as_os_str());
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);

        let file = self
            .generation()?
            .env
            .copy_to_path(&tmp, CompactionOption::Enabled)
            .map_err(|e| BackendError::copy(target.clone(), e))?;
        let finish = || -> std::io::Result<()> {
            file.sync_all()?;
            fs::rename(&tmp, &target)?;
            if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
            Ok(())
        };
        if let Err(e) = finish() {
            // Best effort: the copy is useless without its sync or rename.
            let _ = fs::remove_file(&tmp);
            return Err(BackendError::copy(target, e));
        }
        Ok(target)
    }

    pub(crate) fn lmdb(&self, e: heed::Error) -> BackendError {
        BackendError::lmdb(e, self.map_size)
    }

    #[cfg(test)]
    pub(crate) fn env_flags(&self) -> u32 {
        self.generation()
            .ok()
            .and_then(|g| g.env.get_flags().ok())
            .expect("flags of an open environment")
    }
}

/// Opens the environment with read transactions that don't use thread-local storage: the
/// reader slot belongs to the transaction, not the thread, so one thread may hold several read
/// transactions (an actor serving overlapping requests) and a read transaction may move
/// between threads.
#[allow(unsafe_code)]
fn open_env(dir: &Path, opts: &BackendOptions, map_size: usize) -> heed::Result<Env<WithoutTls>> {
    let mut builder = EnvOpenOptions::new().read_txn_without_tls();
    builder
        .map_size(map_size)
        .max_dbs(MAX_DBS)
        .max_readers(opts.max_readers);
    // SAFETY: heed marks NO_SYNC / NO_META_SYNC unsafe because they give up durability, not
    // memory safety: a commit returns before its pages reach the disk. The raft WAL is the
    // source of truth and replays every entry above the consistent index, which is written in
    // the same transaction as the data it covers; the daemon calls `force_sync` every 100 ms
    // and before releasing WAL segments (crate doc, "Durability").
    unsafe {
        builder.flags(opts.durability.env_flags());
    }
    // SAFETY: the map stays valid as long as nothing else modifies `data.mdb` behind LMDB's
    // back: the directory belongs to this member (`member/snap/`), is local (LMDB's locking
    // does not work over network file systems), and heed refuses a second open of the same
    // path in this process; other processes are excluded by LMDB's lock file.
    unsafe { builder.open(dir) }
}

/// The address ranges of the mappings of the file with inode `ino` in a `/proc/PID/maps`
/// listing, whatever its name now (a replaced file shows as `path (deleted)`).
#[cfg(target_os = "linux")]
pub(crate) fn mappings_of_inode(maps: &str, ino: u64) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            if fields.nth(3)?.parse::<u64>().ok()? != ino {
                return None;
            }
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

/// The address ranges of `file`'s mappings in a `/proc/PID/maps` listing (`start-end perms
/// offset dev inode path` a line); a file replaced since it was mapped shows as `path
/// (deleted)` and is not `file` any more.
#[cfg(target_os = "linux")]
pub(crate) fn mappings_of(maps: &str, file: &Path) -> Vec<(usize, usize)> {
    let Some(name) = file.to_str() else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(|line| {
            let before = line.strip_suffix(name)?;
            if !before.ends_with(' ') {
                return None;
            }
            let (start, end) = line.split_whitespace().next()?.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

/// The handle the state owners read through: only [`crate::BackendActor`] writes.
impl ReadEngine for LmdbEngine {
    fn release_scanned_pages(&self) {
        if let Err(e) = self.release_mapped_pages() {
            tracing::debug!(error = %e, "could not release the data file's mapped pages");
        }
    }

    fn begin_read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(LmdbRead::new(self)?))
    }

    fn begin_read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Ok(Box::new(LmdbRead::owned(self)?))
    }

    fn usage(&self) -> StorageResult<(u64, u64)> {
        Ok(self.disk_size()?)
    }

    fn max_key_size(&self) -> Option<usize> {
        Some(self.max_key_size)
    }
}

impl KvEngine for LmdbEngine {
    fn read(&self) -> StorageResult<Box<dyn ReadTxn + '_>> {
        Ok(Box::new(LmdbRead::new(self)?))
    }

    /// Blocks while another write transaction is open (LMDB's writer mutex).
    fn write(&self) -> StorageResult<Box<dyn WriteTxn + '_>> {
        Ok(Box::new(LmdbWrite::new(self, None)?))
    }

    fn read_owned(self: Arc<Self>) -> StorageResult<Box<dyn ReadTxn + Send>> {
        Ok(Box::new(LmdbRead::owned(self)?))
    }

    fn write_owned(self: Arc<Self>) -> StorageResult<Box<dyn WriteTxn>> {
        Ok(Box::new(LmdbWrite::owned(self)?))
    }

    fn sync(&self) -> StorageResult<()> {
        Ok(self.force_sync()?)
    }

    fn size(&self) -> StorageResult<(u64, u64)> {
        Ok(self.disk_size()?)
    }

    fn defragment(&self) -> StorageResult<(u64, u64)> {
        Ok(LmdbEngine::defragment(self)?)
    }
}
