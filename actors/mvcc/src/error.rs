//! The store's error: either one request's client-visible [`EtcdError`], which fails only that
//! request, or a storage failure, which fails the whole batch.

use actcd_types::EtcdError;
use actcd_types::key_record::DamagedRecord;
use actcd_types::storage::StorageError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request is refused (etcd's message); the rest of the batch goes on.
    #[error(transparent)]
    Request(#[from] EtcdError),
    /// The engine failed: the batch is abandoned and memory left as it was.
    #[error("mvcc: {0}")]
    Storage(#[from] StorageError),
    /// The key table is not what the index and the format say it must be.
    #[error("mvcc: corrupt key table: {0}")]
    Corrupt(String),
    /// A `key` record failed its check: the request that read it fails with etcd's `corrupt
    /// cluster` (the rest of a batch goes on), and whoever met it reports it
    /// ([`crate::damage::DamageReport`]).
    #[error("mvcc: {0}")]
    Damaged(#[from] DamagedRecord),
}

impl From<Error> for EtcdError {
    /// Storage failures reach clients as etcd's unknown error carrying the text, the way etcd
    /// reports backend failures it doesn't name.
    fn from(e: Error) -> Self {
        match e {
            Error::Request(e) => e,
            Error::Damaged(_) => EtcdError::Corrupt,
            other => EtcdError::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_keep_etcds_text_damage_is_corrupt_and_storage_errors_become_internal() {
        struct Case {
            err: Error,
            want: EtcdError,
        }
        let cases = [
            Case {
                err: EtcdError::Compacted.into(),
                want: EtcdError::Compacted,
            },
            Case {
                err: EtcdError::LeaseNotFound.into(),
                want: EtcdError::LeaseNotFound,
            },
            Case {
                err: StorageError("disk full".into()).into(),
                want: EtcdError::Internal("mvcc: backend: disk full".into()),
            },
            Case {
                err: Error::Corrupt("bad record".into()),
                want: EtcdError::Internal("mvcc: corrupt key table: bad record".into()),
            },
            Case {
                err: DamagedRecord::missing(actcd_types::Revision::new(3, 0)).into(),
                want: EtcdError::Corrupt,
            },
        ];
        for c in cases {
            assert_eq!(EtcdError::from(c.err), c.want);
        }
    }
}
