//! Online defragmentation: a compacted copy of the data file made off the writer's thread
//! while the backend goes on committing, the commits made meanwhile replayed into it in
//! rounds, and the swap; [`DefragRun`] is the writer's bookkeeping of one.
//!
//! Why replaying from before the copy's own snapshot is exact: every op is a put or delete of
//! one key, so a key's value after a run of ops is the last op on it in the run, or what it was
//! before if none touched it. The copy is a snapshot taken at some commit `c` at or after the
//! point `p` where recording began; replaying every op recorded since `p` onto it gives each key
//! the last op on it since `p` if any touched it (as the data file has), else its value at `c`,
//! which no op since `p` changed. So the copy need not say which commit it saw.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use actcd_types::msg::Commit;
use actcd_types::storage::{StorageError, WriteTxn, write_ops};
use heed::CompactionOption;

use crate::engine::{DATA_FILE, Generation, LmdbEngine, open_generation, sync_dir};
use crate::error::BackendError;
use crate::txn::LmdbWrite;

/// A defragmentation's copy directory, inside the environment's: `defrag-N`. It holds the
/// copy's `data.mdb` until the swap renames it over the data file, and the copy's lock file for
/// as long as that environment is open.
const DIR_PREFIX: &str = "defrag-";

/// Above this many ops still to replay, another round runs on a worker thread; at or below it,
/// the last round runs on the writer's thread, followed at once by the swap.
pub const FINAL_ROUND_OPS: usize = 4096;

/// Rounds on worker threads before the last one runs on the writer's thread whatever its size
/// (writes arriving as fast as a round replays them).
pub const MAX_ROUNDS: u32 = 8;

/// The most bytes of commits kept for replay. Past it the defragmentation gives up (its answer
/// is an error, the data file is unchanged) rather than hold more memory.
pub const MAX_LOG_BYTES: usize = 1 << 30;

/// Bytes of records per commit while a store is built from a leader's snapshot: LMDB keeps a
/// write transaction's pages in memory until it commits (large values' pages are never
/// spilled early), so this bounds the memory a build takes.
pub const PREPARE_BATCH_BYTES: usize = 64 << 20;

/// Removes the copy directories of defragmentations a crash interrupted: before its swap the
/// copy is of no use (the data file is whole); after it the directory holds only a lock file.
pub(crate) fn remove_leftovers(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        if ours && path.is_dir() {
            tracing::warn!(path = %path.display(), "removing an unfinished defragmentation's directory");
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// A compacted copy of the data file, open as an environment of its own in `defrag-N`, not
/// swapped in yet. Dropped, it removes its directory.
pub struct DefragCopy {
    generation: Arc<Generation>,
    dir: PathBuf,
    /// The data file's size when the copy began.
    before: u64,
}

impl std::fmt::Debug for DefragCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefragCopy")
            .field("dir", &self.dir)
            .field("before", &self.before)
            .finish_non_exhaustive()
    }
}

impl LmdbEngine {
    /// Writes a compacted copy of the last commit (only live pages) into a new `defrag-N`
    /// directory and opens it. Any thread; the writer commits on meanwhile, and what it
    /// commits from the moment before this call must be replayed into the copy
    /// ([`DefragCopy::replay`]) before [`Self::defrag_swap`].
    pub fn defrag_copy(&self) -> Result<DefragCopy, BackendError> {
        let (before, _) = self.disk_size()?;
        let dir = self.new_copy_dir()?;
        let started = std::time::Instant::now();
        match self.copy_into(&dir) {
            Ok(generation) => {
                tracing::info!(
                    copy_ms = started.elapsed().as_secs_f64() * 1e3,
                    path = %dir.display(),
                    "defragmentation's compacted copy written"
                );
                Ok(DefragCopy {
                    generation: Arc::new(generation),
                    dir,
                    before,
                })
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Builds a store from a leader's snapshot blob (`data`, a mapped file) in a new `defrag-N`
    /// directory beside the one in use, committing every [`PREPARE_BATCH_BYTES`] (the store is
    /// nobody's yet, so a crash part-way only leaves a directory the next open deletes), and
    /// syncs it. Any thread; [`Self::swap_in_copy`] then puts it in use, as a defragmentation's
    /// copy.
    pub fn prepare_from_blob(&self, data: &[u8]) -> Result<DefragCopy, BackendError> {
        let (before, _) = self.disk_size()?;
        let dir = self.new_copy_dir()?;
        let started = std::time::Instant::now();
        let built = open_generation(&dir, &self.opts, self.map_size, Some(dir.clone()))
            .map(Arc::new)
            .and_then(|generation| {
                let mut begin = || -> Result<Box<dyn WriteTxn + '_>, StorageError> {
                    let txn = LmdbWrite::in_generation(self, Arc::clone(&generation), None)?;
                    Ok(Box::new(txn))
                };
                actcd_etcd_snapshot::whole_store::install_blob_batched(
                    &mut begin,
                    data,
                    PREPARE_BATCH_BYTES,
                )
                .map_err(|e| {
                    BackendError::Defragment(format!("building the snapshot's store: {e}"))
                })?;
                generation.env.force_sync().map_err(|e| self.lmdb(e))?;
                Ok(generation)
            });
        match built {
            Ok(generation) => {
                tracing::info!(
                    build_ms = started.elapsed().as_secs_f64() * 1e3,
                    bytes = data.len(),
                    path = %dir.display(),
                    "store built from a leader's snapshot"
                );
                Ok(DefragCopy {
                    generation,
                    dir,
                    before,
                })
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// A new, empty `defrag-N` directory for a copy.
    fn new_copy_dir(&self) -> Result<PathBuf, BackendError> {
        let n = self.defrag_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let dir = self.dir.join(format!("{DIR_PREFIX}{n}"));
        let _ = fs::remove_dir_all(&dir);
        actcd_types::private_fs::touch_private_dir(&dir).map_err(|source| {
            BackendError::CreateDir {
                path: dir.clone(),
                source,
            }
        })?;
        Ok(dir)
    }

    fn copy_into(&self, dir: &Path) -> Result<Generation, BackendError> {
        let data = dir.join(DATA_FILE);
        let copy = |e: std::io::Error| BackendError::copy(data.clone(), e);
        let generation = self.generation()?;
        // 0600, as the file it replaces (and as bbolt's defragmentation creates its copy).
        let mut file = actcd_types::private_fs::create_private_file(&data, true).map_err(copy)?;
        copy_paced(&generation.env, &mut file).map_err(|e| match e {
            PacedCopyError::Io(e) => copy(e),
            PacedCopyError::Lmdb(e) => BackendError::copy(data.clone(), e),
        })?;
        file.sync_all().map_err(copy)?;
        drop(generation);
        // `return`: the copy is dropped and the defragmentation answers the error.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("defrag_after_copy", |_| Err(BackendError::Defragment(
            "injected by failpoint defrag_after_copy".into()
        )));
        open_generation(dir, &self.opts, self.map_size, Some(dir.to_owned()))
    }

    /// Swaps `copy` in for the data file. The caller is the one writer: it has committed its
    /// batch, replayed into the copy every commit made since [`Self::defrag_copy`] was called,
    /// and commits nothing until this returns. Returns the file's size before and after.
    ///
    /// The copy is synced, renamed over `data.mdb` in one atomic step, the directory synced,
    /// and the copy's environment becomes the one in use. Transactions of the old environment
    /// read on in it (its file lives while they do); [`Self::reap_retired`] closes it once they
    /// have ended. A crash before the rename leaves the old file (the copy is deleted at the
    /// next open); after it the copy, which holds every commit.
    pub fn defrag_swap(&self, copy: DefragCopy) -> Result<(u64, u64), BackendError> {
        self.swap_in_copy(copy, "backend defragmented")
    }

    /// [`Self::defrag_swap`] for any copy: a defragmentation's, or a store built from a
    /// leader's snapshot ([`Self::prepare_from_blob`]); `done` is what the log says after.
    pub fn swap_in_copy(
        &self,
        copy: DefragCopy,
        done: &'static str,
    ) -> Result<(u64, u64), BackendError> {
        let DefragCopy {
            generation,
            dir,
            before,
        } = copy;
        let clock = std::time::Instant::now();
        let ms = |from: std::time::Instant| from.elapsed().as_secs_f64() * 1e3;
        generation.env.force_sync().map_err(|e| self.lmdb(e))?;
        let sync_ms = ms(clock);
        let clock = std::time::Instant::now();
        // The file being replaced, kept open: closed with its environment, it would give
        // all its blocks back to the file system in one go (see [`Retired`]).
        let replaced = fs::File::options()
            .read(true)
            .write(true)
            .open(self.dir.join(DATA_FILE))
            .ok();
        if let Err(e) = swap_in(&dir.join(DATA_FILE), &self.dir.join(DATA_FILE)) {
            // `generation` goes, and its directory with it.
            return Err(BackendError::Defragment(format!(
                "cannot swap in the copy: {e}"
            )));
        }
        // The data file is the copy now: from here on it is the environment in use, whatever
        // else fails (the old file takes no commit it would not have).
        let rename_ms = ms(clock);
        let clock = std::time::Instant::now();
        let synced = sync_dir(&self.dir);
        let dir_sync_ms = ms(clock);
        // `panic`: the member dies with the copy renamed in and the old environment in use.
        // `return`: the swap completes and the defragmentation answers the error.
        #[cfg(feature = "failpoints")]
        let injected = (|| {
            fail::fail_point!("defrag_after_swap", |_| Some(BackendError::Defragment(
                "injected by failpoint defrag_after_swap".into()
            )));
            None
        })();
        let old = self
            .current
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .replace(generation);
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(old.map(|generation| Retired {
                generation,
                file: replaced,
            }));
        #[cfg(feature = "failpoints")]
        if let Some(e) = injected {
            return Err(e);
        }
        synced.map_err(|e| {
            BackendError::Defragment(format!(
                "the copy is in use, but its rename may not be durable: {e}"
            ))
        })?;
        let (after, _) = self.disk_size()?;
        tracing::info!(before, after, sync_ms, rename_ms, dir_sync_ms, "{done}");
        Ok((before, after))
    }

    /// Closes, on a thread of their own, the environments defragmentations replaced whose
    /// transactions have all ended (see `Retired`); returns those threads.
    pub fn reap_retired(&self) -> Vec<std::thread::JoinHandle<()>> {
        let done: Vec<Retired> = {
            let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
            // Only transactions hold other handles, and none can be made from this one: a
            // count of one stays one.
            let (done, open) = std::mem::take(&mut *retired)
                .into_iter()
                .partition(|r| Arc::strong_count(&r.generation) == 1);
            *retired = open;
            done
        };
        done.into_iter()
            .filter_map(|r| {
                std::thread::Builder::new()
                    .name("defrag-close".into())
                    .spawn(move || {
                        lower_priority();
                        r.close();
                    })
                    .map_err(|e| tracing::warn!(error = %e, "cannot close a replaced environment on a thread of its own"))
                    .ok()
            })
            .collect()
    }

    /// [`Self::reap_retired`] without waiting: the closing threads are kept, and joined when
    /// the engine goes.
    pub fn reap_retired_in_background(&self) {
        let started = self.reap_retired();
        let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
        closing.retain(|t| !t.is_finished());
        closing.extend(started);
    }

    /// Environments replaced by a defragmentation and still open for their transactions.
    pub fn retired_generations(&self) -> usize {
        self.retired.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Defragments in one call (etcd's `Defragment` without a writer running beside it: at
    /// start-up, or a store writing straight into the engine): the copy, then the swap. The
    /// caller is the one writer and writes nothing meanwhile. Returns once the replaced
    /// environment is closed, unless a transaction still holds it.
    pub fn defragment(&self) -> Result<(u64, u64), BackendError> {
        let copy = self.defrag_copy()?;
        let swapped = self.defrag_swap(copy);
        for closing in self.reap_retired() {
            let _ = closing.join();
        }
        swapped
    }
}

impl DefragCopy {
    /// Replays `commits` into the copy in one write transaction. Any thread, one replay at a
    /// time.
    pub fn replay(&self, engine: &LmdbEngine, commits: &[Commit]) -> Result<(), BackendError> {
        if commits.is_empty() {
            return Ok(());
        }
        let replay = |e: actcd_types::storage::StorageError| {
            BackendError::Defragment(format!("replaying into the copy: {e}"))
        };
        let mut txn = LmdbWrite::in_generation(engine, Arc::clone(&self.generation), None)?;
        for c in commits {
            write_ops(&mut txn, &c.ops, c.consistent_index).map_err(replay)?;
        }
        Box::new(txn).commit().map_err(replay)
    }
}

/// An environment a defragmentation replaced, and its file (unlinked by the swap's rename,
/// kept open here).
///
/// Closing it all at once stalls the whole member (measured: 83 ms on a 72 MiB file, every
/// put, read and watch event waiting): `munmap` tears down the resident pages under the
/// process's address-space lock, which every page fault of every thread needs, and the last
/// close of the unlinked file frees all its blocks in one journal transaction, which the WAL's
/// next sync waits for. So [`Retired::close`] gives the pages back in slices first
/// (`madvise(MADV_DONTNEED)` takes that lock shared), then closes the environment, then
/// shortens the file a slice at a time before letting it go.
pub(crate) struct Retired {
    pub(crate) generation: Arc<Generation>,
    pub(crate) file: Option<fs::File>,
}

/// Bytes of mapping given back, or of file cut off, in one step of [`Retired::close`].
const CLOSE_SLICE: u64 = 8 << 20;

impl Retired {
    fn close(self) {
        let Retired { generation, file } = self;
        #[cfg(target_os = "linux")]
        if let Some(f) = &file {
            use std::os::unix::fs::MetadataExt;
            let maps = f
                .metadata()
                .and_then(|m| Ok((m.ino(), fs::read_to_string("/proc/self/maps")?)));
            if let Ok((ino, maps)) = maps {
                for (start, end) in crate::engine::mappings_of_inode(&maps, ino) {
                    let mut at = start;
                    while at < end {
                        let len = (end - at).min(CLOSE_SLICE as usize);
                        // SAFETY: `at..at + len` lies in one of this process's mappings of
                        // the replaced file, made by LMDB read-only and shared, and kept
                        // mapped by `generation`, which no transaction holds any more:
                        // dropping its page-table entries loses nothing and nobody reads it.
                        #[allow(unsafe_code)]
                        unsafe {
                            libc::madvise(at as *mut libc::c_void, len, libc::MADV_DONTNEED);
                        }
                        at += len;
                        std::thread::yield_now();
                    }
                }
            }
        }
        drop(generation);
        if let Some(f) = file {
            let mut len = f.metadata().map_or(0, |m| m.len());
            while len > 0 {
                len = len.saturating_sub(CLOSE_SLICE);
                if f.set_len(len).is_err() {
                    break;
                }
                // One slice's blocks per journal commit, with the WAL's syncs in between.
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }
}

/// How much of the copy may be written and not yet on disk: ext4 (`data=ordered`) flushes a
/// file's dirty pages with the next journal commit, which the WAL's `fdatasync` waits for, so
/// a copy written whole and synced at the end would hold one WAL sync for as long as the disk
/// takes to write it (measured: about 55 ms for 39 MiB, every put, read and watch event waiting
/// behind it). In chunks this size, written back one at a time, a WAL sync waits for one
/// (4 MiB chunks still added up to 10 ms to reads and writes during a million keys' copy).
const COPY_CHUNK: u64 = 1 << 20;

enum PacedCopyError {
    Io(std::io::Error),
    Lmdb(heed::Error),
}

/// LMDB's compacting copy of `env` into `file`, through a pipe so that the copy reaches the
/// disk [`COPY_CHUNK`] by [`COPY_CHUNK`] rather than all at once.
#[allow(unsafe_code)]
fn copy_paced(
    env: &heed::Env<heed::WithoutTls>,
    file: &mut fs::File,
) -> Result<(), PacedCopyError> {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    let (read_end, write_end) = std::io::pipe().map_err(PacedCopyError::Io)?;
    std::thread::scope(|scope| {
        let copier = scope.spawn(move || {
            // SAFETY: `write_end` is a pipe opened for writing, kept open (owned by this
            // closure) until the copy returns. LMDB writes the compacted file to it in order.
            let done = unsafe { env.copy_to_fd(write_end.as_raw_fd(), CompactionOption::Enabled) };
            drop(write_end);
            done
        });
        let mut reader = read_end;
        let mut buf = vec![0u8; 1 << 20];
        let mut written = 0u64;
        let mut flushed = 0u64;
        let pumped = (|| -> std::io::Result<()> {
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                file.write_all(&buf[..n])?;
                written += n as u64;
                if written - flushed >= COPY_CHUNK {
                    write_back(file, flushed, written - flushed)?;
                    flushed = written;
                }
            }
        })();
        // On an error the read end closes here, and LMDB's next write fails (EPIPE).
        drop(reader);
        let copied = copier.join().unwrap_or_else(|_| {
            Err(heed::Error::Io(std::io::Error::other(
                "the copying thread panicked",
            )))
        });
        pumped.map_err(PacedCopyError::Io)?;
        copied.map_err(PacedCopyError::Lmdb)
    })
}

/// Makes the calling thread (and the threads it starts, LMDB's copier among them) yield to
/// the member's own: the lowest CPU priority (nice 19) and the lowest best-effort I/O priority.
/// A defragmentation is background work; on a 2-core machine its copy otherwise takes a core
/// the write path needs.
#[allow(unsafe_code)]
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain syscalls on this thread's own id; no memory is passed.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, 19);
            // IOPRIO_WHO_PROCESS (a thread id here), class best-effort (2), level 7.
            libc::syscall(libc::SYS_ioprio_set, 1, tid, (2 << 13) | 7);
        }
    }
}

/// Starts writing `len` bytes of `file` at `offset` back to disk, and waits for everything
/// before them: at most two chunks are ever on their way.
#[allow(unsafe_code)]
fn write_back(file: &fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        let call = |off: u64, len: u64, flags: libc::c_uint| -> std::io::Result<()> {
            // SAFETY: `fd` is an open file this function borrows; sync_file_range reads no
            // memory of ours.
            let rc = unsafe { libc::sync_file_range(fd, off as i64, len as i64, flags) };
            if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        call(offset, len, libc::SYNC_FILE_RANGE_WRITE)?;
        if offset > 0 {
            call(
                0,
                offset,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )?;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
    Ok(())
}

/// A defragmentation's swap: the compacted copy renamed over the data file, in one step.
fn swap_in(copy: &Path, data: &Path) -> std::io::Result<()> {
    // `return`: the rename fails, and the defragmentation takes that path.
    #[cfg(feature = "failpoints")]
    fail::fail_point!("defrag_before_swap", |_| Err(std::io::Error::other(
        "injected by failpoint defrag_before_swap"
    )));
    fs::rename(copy, data)
}

/// What the writer does next in a defragmentation, once the copy or a round is done.
#[derive(Debug)]
pub enum DefragStep {
    /// Replay these commits into the copy on a worker thread, then ask again.
    Replay(Vec<Commit>),
    /// On the writer's thread: commit the batch (what it holds is recorded already), replay
    /// these, and swap.
    Finish(Vec<Commit>),
    /// Give up: drop the copy and answer this.
    Abort(String),
}

/// One online defragmentation as the writer sees it: the commits made since it began, not yet
/// replayed into the copy, and how many rounds have run. Plain bookkeeping; the actor moves
/// the copy between its thread and the workers.
#[derive(Debug, Default)]
pub struct DefragRun {
    log: Vec<Commit>,
    ops: usize,
    bytes: usize,
    rounds: u32,
    failed: Option<String>,
}

impl DefragRun {
    pub fn new() -> Self {
        Self::default()
    }

    /// A commit written into the batch since the defragmentation began: kept for replay.
    pub fn record(&mut self, commit: Commit) {
        if self.failed.is_some() {
            return;
        }
        self.ops += commit.ops.len().max(1);
        self.bytes += commit.ops.iter().map(|o| o.bytes()).sum::<usize>();
        self.log.push(commit);
        if self.bytes > MAX_LOG_BYTES {
            self.fail(format!(
                "more than {MAX_LOG_BYTES} bytes written during the defragmentation; try again when writes are fewer"
            ));
        }
    }

    /// The defragmentation cannot finish (the log is too big, the backend failed).
    pub fn fail(&mut self, why: String) {
        self.log = Vec::new();
        self.failed.get_or_insert(why);
    }

    /// What to do now the copy, or the last round, is done.
    pub fn next_step(&mut self) -> DefragStep {
        if let Some(why) = &self.failed {
            return DefragStep::Abort(why.clone());
        }
        let log = std::mem::take(&mut self.log);
        let ops = std::mem::take(&mut self.ops);
        self.bytes = 0;
        if ops <= FINAL_ROUND_OPS || self.rounds >= MAX_ROUNDS {
            DefragStep::Finish(log)
        } else {
            self.rounds += 1;
            DefragStep::Replay(log)
        }
    }
}
