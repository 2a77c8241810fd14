//! A leader's store copy as a follower received it: a file in the member's snapshot directory, read in place and removed once dropped.
//!
//! A copy of a large store never lives in memory: the leader streams it out of a read
//! transaction, the follower's transport writes it here chunk by chunk and checks it, and the
//! store installs it through a read-only map of the file (the page cache's pages, not the
//! member's). A crash leaves at most a stray `incoming-*` file, which [`remove_leftovers`]
//! deletes at the next start (raft sends the snapshot again).

use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What received copies are named after, in the snapshot directory.
const PREFIX: &str = "incoming-";
const SUFFIX: &str = ".actcdsnap";

/// A received store copy on disk; the file goes when this is dropped.
#[derive(Debug)]
pub struct SnapshotBlob {
    path: PathBuf,
}

impl SnapshotBlob {
    /// A fresh file name in `dir` for the next copy received (unique within the process).
    pub fn incoming_path(dir: &Path) -> PathBuf {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        dir.join(format!("{PREFIX}{}-{n}{SUFFIX}", std::process::id()))
    }

    /// Takes over `path`, a whole and checked copy: it is removed when the blob is dropped.
    pub fn adopt(path: PathBuf) -> io::Result<Self> {
        std::fs::metadata(&path)?;
        Ok(Self { path })
    }

    /// A new, empty copy at `path` to be written through the file returned; it is removed
    /// when the blob is dropped, whole or not (a copy whose receiving failed goes at once).
    pub fn create(path: PathBuf) -> io::Result<(Self, std::fs::File)> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(crate::private_fs::PRIVATE_FILE_MODE)
            .open(&path)?;
        Ok((Self { path }, file))
    }

    /// Writes `data` as a new copy at `path` (tests, and callers that hold the bytes already).
    pub fn write(path: PathBuf, data: &[u8]) -> io::Result<Self> {
        let (blob, mut file) = Self::create(path)?;
        io::Write::write_all(&mut file, data)?;
        Ok(blob)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The copy's size in bytes (0 if it cannot be read).
    pub fn len(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The copy, mapped read-only and read front to back (`MADV_SEQUENTIAL`).
    pub fn map(&self) -> io::Result<memmap2::Mmap> {
        let file = std::fs::File::open(&self.path)?;
        // SAFETY: the file is this process's own (`incoming_path` names it after the pid),
        // written whole before it was adopted and never written again; nothing else truncates
        // it while the map lives, which is what would make reading the map fault.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::Mmap::map(&file)? };
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(map)
    }
}

impl Drop for SnapshotBlob {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "received snapshot not removed");
        }
    }
}

/// A leader's store copy as a follower holds it: the file received, or the store the backend
/// built from it beside the one in use ([`PreparedStore`]), ready to be swapped in.
#[derive(Debug)]
pub enum StoreCopy {
    Blob(SnapshotBlob),
    Prepared(PreparedStore),
}

/// A store the backend built from a received copy, not in use yet; it belongs to the backend,
/// which swaps it in when handed this back (`ReplaceStore`). Dropped unused (raft took a newer
/// snapshot, or refused this one), it tells the backend to delete the store.
pub struct PreparedStore {
    id: u64,
    release: Option<actix::Recipient<ReleasePrepared>>,
}

/// A prepared store is not wanted any more: delete it.
#[derive(Debug, actix::Message)]
#[rtype(result = "()")]
pub struct ReleasePrepared {
    pub id: u64,
}

impl PreparedStore {
    /// The backend's store `id`; `release` hears when this is dropped unused.
    pub fn new(id: u64, release: actix::Recipient<ReleasePrepared>) -> Self {
        Self {
            id,
            release: Some(release),
        }
    }

    /// The store's id, for the backend that swaps it in (dropping the result releases
    /// nothing).
    pub fn take(mut self) -> u64 {
        self.release = None;
        self.id
    }
}

impl std::fmt::Debug for PreparedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedStore")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for PreparedStore {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release.do_send(ReleasePrepared { id: self.id });
        }
    }
}

/// Deletes copies a crashed process left in `dir`; returns how many.
pub fn remove_leftovers(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(PREFIX) && name.ends_with(SUFFIX)
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_maps_its_bytes_and_goes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = SnapshotBlob::incoming_path(dir.path());
        assert_ne!(
            path,
            SnapshotBlob::incoming_path(dir.path()),
            "unique names"
        );
        let blob = SnapshotBlob::write(path.clone(), b"actcdsn1 and more").unwrap();
        assert_eq!(blob.len(), 17);
        assert_eq!(&blob.map().unwrap()[..], b"actcdsn1 and more");
        drop(blob);
        assert!(!path.exists());

        let path = SnapshotBlob::incoming_path(dir.path());
        let (blob, mut file) = SnapshotBlob::create(path.clone()).unwrap();
        std::io::Write::write_all(&mut file, b"half").unwrap();
        assert_eq!(blob.len(), 4);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o600,
            "a leader's copy of the key space is the member's alone"
        );
        assert!(
            SnapshotBlob::create(path.clone()).is_err(),
            "never over another"
        );
        drop(blob);
        assert!(!path.exists(), "a copy not received whole goes too");
    }

    #[test]
    fn leftovers_of_a_crash_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let stray = SnapshotBlob::incoming_path(dir.path());
        std::fs::write(&stray, b"half").unwrap();
        std::fs::write(dir.path().join("data.mdb"), b"keep").unwrap();
        assert_eq!(remove_leftovers(dir.path()), 1);
        assert!(!stray.exists());
        assert!(dir.path().join("data.mdb").exists());
        assert_eq!(remove_leftovers(&dir.path().join("absent")), 0);
    }
}
