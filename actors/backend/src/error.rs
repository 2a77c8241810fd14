//! The backend's errors. Every message starts with the `backend: ` subsystem prefix; converted
//! into the engine traits' [`StorageError`] (which adds that prefix itself) it is carried once.

use std::io;
use std::path::PathBuf;

use actcd_types::storage::StorageError;

const PREFIX: &str = "backend: ";

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("backend: cannot create directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },

    #[error("backend: cannot open LMDB environment at {path}: {source}")]
    Open { path: PathBuf, source: heed::Error },

    /// The memory map is full: LMDB cannot grow the file any further. The quota check
    /// (`--quota-backend-bytes`) must trip long before this; raise `map_size` if it does not.
    #[error("backend: database space exceeded (LMDB map size {map_size} bytes is full)")]
    MapFull { map_size: usize },

    /// LMDB stores keys of 1 to `max` bytes (511 unless LMDB is built otherwise).
    #[error("backend: a key of {len} bytes cannot be stored (LMDB keys are 1 to {max} bytes)")]
    KeySize { len: usize, max: usize },

    #[error("backend: cannot copy the environment to {path}: {source}")]
    Copy { path: PathBuf, source: heed::Error },

    /// A defragmentation that did not happen; the data file is unchanged.
    #[error("backend: defragment: {0}")]
    Defragment(String),

    /// The environment could not be reopened after a defragmentation.
    #[error("backend: the environment is closed (restart the member)")]
    Closed,

    #[error("backend: lmdb: {0}")]
    Lmdb(heed::Error),
}

impl BackendError {
    /// Wraps an LMDB error, singling out a full map so callers and operators can tell it apart.
    pub(crate) fn lmdb(e: heed::Error, map_size: usize) -> Self {
        match e {
            heed::Error::Mdb(heed::MdbError::MapFull) => BackendError::MapFull { map_size },
            e => BackendError::Lmdb(e),
        }
    }

    /// The error as an I/O-style copy failure.
    pub(crate) fn copy(path: PathBuf, e: impl Into<heed::Error>) -> Self {
        BackendError::Copy {
            path,
            source: e.into(),
        }
    }
}

impl From<BackendError> for StorageError {
    fn from(e: BackendError) -> Self {
        let msg = e.to_string();
        // StorageError's Display adds the prefix again.
        StorageError(msg.strip_prefix(PREFIX).unwrap_or(&msg).to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_carries_the_prefix_once() {
        struct Case {
            err: BackendError,
            want_storage: &'static str,
        }
        let cases = [
            Case {
                err: BackendError::MapFull { map_size: 4096 },
                want_storage: "backend: database space exceeded (LMDB map size 4096 bytes is full)",
            },
            Case {
                err: BackendError::CreateDir {
                    path: "/x".into(),
                    source: io::Error::other("denied"),
                },
                want_storage: "backend: cannot create directory /x: denied",
            },
            Case {
                err: BackendError::Lmdb(heed::Error::Mdb(heed::MdbError::Corrupted)),
                want_storage: "backend: lmdb: MDB_CORRUPTED: Located page was wrong type",
            },
        ];
        for c in cases {
            assert!(c.err.to_string().starts_with(PREFIX), "{}", c.err);
            assert_eq!(StorageError::from(c.err).to_string(), c.want_storage);
        }
    }

    #[test]
    fn a_full_map_is_told_apart() {
        let e = BackendError::lmdb(heed::Error::Mdb(heed::MdbError::MapFull), 1 << 20);
        assert!(matches!(
            e,
            BackendError::MapFull {
                map_size: 1_048_576
            }
        ));
        let e = BackendError::lmdb(heed::Error::Mdb(heed::MdbError::Corrupted), 1 << 20);
        assert!(matches!(e, BackendError::Lmdb(_)));
    }
}
