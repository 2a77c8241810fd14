use std::io;
use std::path::{Path, PathBuf};

/// Everything the WAL can fail with. Messages carry the `wal:` prefix and, where a file is
/// involved, its path (and for corruption the byte offset), so an operator can find the damage.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("wal: {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Damage that is not a torn final record: the WAL refuses to open.
    #[error("wal: corrupt segment {} at offset {offset}: {reason}", file.display())]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },

    #[error("wal: {} already holds a WAL", dir.display())]
    AlreadyExists { dir: PathBuf },

    #[error("wal: no WAL segments in {}", dir.display())]
    NotFound { dir: PathBuf },

    /// The caller asked for something the log's invariants forbid (a gap, an entry at or below
    /// the snapshot mark, a mark going backwards). Nothing was written.
    #[error("wal: refusing to write: {0}")]
    Invalid(String),

    /// An earlier write or fsync failed. After a failed fsync the kernel may have dropped the
    /// dirty pages, so what is on disk is unknown: only reopening (which verifies and repairs)
    /// is safe.
    #[error("wal: an earlier write or fsync failed; reopen the WAL to recover")]
    Failed,
}

impl WalError {
    /// For `map_err`: wraps an `io::Error` with what we were doing and to which path.
    pub(crate) fn io(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WalError {
        let path = path.to_path_buf();
        move |source| WalError::Io { op, path, source }
    }

    pub(crate) fn corrupt(file: &Path, offset: usize, reason: impl Into<String>) -> WalError {
        WalError::Corrupt {
            file: file.to_path_buf(),
            offset: offset as u64,
            reason: reason.into(),
        }
    }
}
