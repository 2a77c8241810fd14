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
use actcd_types::storage::{WriteTxn, write_ops};
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
        let n = self.defrag_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let dir = self.dir.join(format!("{DIR_PREFIX}{n}"));
        let _ = fs::remove_dir_all(&dir);
        actcd_types::private_fs::touch_private_dir(&dir).map_err(|source| {
            BackendError::CreateDir {
                path: dir.clone(),
                source,
            }
        })?;
        match self.copy_into(&dir) {
            Ok(generation) => Ok(DefragCopy {
                generation: Arc::new(generation),
                dir,
                before,
            }),
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    fn copy_into(&self, dir: &Path) -> Result<Generation, BackendError> {
        let data = dir.join(DATA_FILE);
        let file = self
            .generation()?
            .env
            .copy_to_path(&data, CompactionOption::Enabled)
            .map_err(|e| BackendError::copy(data.clone(), e))?;
        // Synced here, off the writer's thread: the swap's sync then has only the rounds'
        // pages left to write.
        file.sync_all()
            .map_err(|e| BackendError::copy(data.clone(), e))?;
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
        let DefragCopy {
            generation,
            dir,
            before,
        } = copy;
        generation.env.force_sync().map_err(|e| self.lmdb(e))?;
        if let Err(e) = swap_in(&dir.join(DATA_FILE), &self.dir.join(DATA_FILE)) {
            // `generation` goes, and its directory with it.
            return Err(BackendError::Defragment(format!(
                "cannot swap in the copy: {e}"
            )));
        }
        // The data file is the copy now: from here on it is the environment in use, whatever
        // else fails (the old file takes no commit it would not have).
        let synced = sync_dir(&self.dir);
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
            .extend(old);
        self.reap_retired();
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
        tracing::info!(before, after, "backend defragmented");
        Ok((before, after))
    }

    /// Closes the environments defragmentations replaced whose transactions have all ended
    /// (the writer calls it on its thread: closing one unmaps its file).
    pub fn reap_retired(&self) {
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        // Only transactions hold other handles, and none can be made from this one: a count of
        // one stays one.
        retired.retain(|g| Arc::strong_count(g) > 1);
    }

    /// Environments replaced by a defragmentation and still open for their transactions.
    pub fn retired_generations(&self) -> usize {
        self.retired.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Defragments in one call (etcd's `Defragment` without a writer running beside it: at
    /// start-up, or a store writing straight into the engine): the copy, then the swap. The
    /// caller is the one writer and writes nothing meanwhile.
    pub fn defragment(&self) -> Result<(u64, u64), BackendError> {
        let copy = self.defrag_copy()?;
        self.defrag_swap(copy)
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

    /// Ops recorded and not yet handed out for replay.
    pub fn pending_ops(&self) -> usize {
        self.ops
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
