//! The crate's one error type.

use actcd_types::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum EtcdSnapshotError {
    /// A bbolt file that cannot be read, or a source the writer cannot lay out (out of order,
    /// or changed between the writer's two passes).
    #[error("bolt: {0}")]
    Bolt(String),

    /// A record of the store, or of an etcd bucket, that is not what etcd's layout holds there.
    #[error("snapshot: {0}")]
    Layout(String),

    /// A `key` record of the store failed its check: no snapshot carries it.
    #[error("snapshot: {0}")]
    Damaged(#[from] actcd_types::key_record::DamagedRecord),

    /// Reading a snapshot file failed (an I/O error, or a file shorter than it was).
    #[error("reading the snapshot file: {0}")]
    Io(#[from] std::io::Error),

    /// Reading the store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),

    /// Whoever took the chunks went away.
    #[error("snapshot: the receiver went away")]
    Closed,
}
